"""The memos' one policy (clientmcp_fast/core/memo.py): bounded, the oldest entry dropped first."""

from __future__ import annotations

from clientmcp_fast.core.memo import remember


def test_a_memo_keeps_at_most_its_bound_dropping_the_oldest_first():
    memo: dict = {}
    for n in range(10):
        remember(memo, n, str(n), 4)
        assert len(memo) == min(n + 1, 4)
    assert memo == {6: "6", 7: "7", 8: "8", 9: "9"}


def test_remembering_a_key_again_keeps_the_bound():
    memo: dict = {"a": 1, "b": 2}
    remember(memo, "a", 3, 2)  # full: "a", the oldest, goes, and comes back as the newest
    assert memo == {"b": 2, "a": 3}
