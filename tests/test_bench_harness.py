"""`python -m bench.instructions` counts real round trips: its harness must keep making them."""

from __future__ import annotations

import pytest

from bench import instructions


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_counting_harness_makes_a_real_tool_call(era):
    answer = instructions.round_trip(era)()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert body == b'{"jsonrpc":"2.0","id":1,"result":' + (
        b'{"resultType":"complete","content":[{"type":"text","text":"hi"}]}}'
        if era == "modern"
        else b'{"content":[{"type":"text","text":"hi"}]}}'
    )


def test_the_counting_harness_gets_the_exact_pong():
    assert instructions.round_trip("ping")() == b'\x81\x0f{"type":"pong"}'


def test_drive_times_its_calls():
    assert instructions.drive("legacy", 3) > 0.0


@pytest.mark.parametrize("era", ["legacy", "modern", "ping"])
def test_the_stubbed_harness_never_reaches_the_bridge(era):
    # Counted as the harness's own share: a call that reached the bridge would be subtracted from it.
    one = instructions.round_trip(era, stub_calls=2)
    canned = b'\x81\x0f{"type":"pong"}' if era == "ping" else b"HTTP/1.1 200 OK\r\n\r\n"
    assert one() == canned
    assert one() == canned
    with pytest.raises(IndexError):  # nothing but the canned answers was written
        one()
