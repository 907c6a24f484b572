"""The one policy of every memo the core keeps: bounded, the oldest entry dropped first.

Memos save work on values that repeat (an agent's token, its Accept header, a response's
head); the values come from peers, so each memo is bounded, and `docs/limits.md` lists them.
"""

from __future__ import annotations

from typing import Any


def remember(memo: dict, key: Any, value: Any, max_entries: int) -> None:
    """Keep `value` under `key`, first dropping the oldest entry of a `memo` that is full."""
    if len(memo) >= max_entries:
        del memo[next(iter(memo))]  # dicts keep insertion order: the oldest goes
    memo[key] = value
