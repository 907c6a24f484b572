"""Notification streams hold nothing up for an agent that does not read (docs/protocol.md, Notification streams).

A list_changed still unsent covers every change after it, and a keep-alive is for a stream
that sends nothing else: while the peer has not taken what was written (`Exchange.backlog`),
neither is written again. Driven here through the Exchange port with a backlog the test sets.
"""

from __future__ import annotations

import json

import pytest

from clientmcp_fast.core.agent_streams import KEEPALIVE, LegacyStream, ListenStream
from clientmcp_fast.core.http import Exchange


class SlowPeer(Exchange):
    """An exchange whose peer takes nothing while `unread` is set: what is written stays counted."""

    __slots__ = ("written", "unread")

    def __init__(self) -> None:
        self.request = None
        self.on_abandon = None
        self.written: list[bytes] = []
        self.unread = False

    def stream(self, data: bytes) -> None:
        self.written.append(data)

    def backlog(self) -> int:
        return sum(map(len, self.written)) if self.unread else 0


def kinds(peer: SlowPeer) -> list[str]:
    """What was written, as `change` for a list_changed and `keep-alive` for a comment."""
    out = []
    for data in peer.written:
        if data == KEEPALIVE:
            out.append("keep-alive")
        else:
            (line,) = [line for line in data.decode().splitlines() if line.startswith("data:")]
            assert json.loads(line[5:])["method"] == "notifications/tools/list_changed"
            out.append("change")
    return out


STREAMS = {
    "legacy": lambda peer: LegacyStream(peer),
    "modern": lambda peer: ListenStream(peer, b"7", True),
}


@pytest.fixture(params=sorted(STREAMS))
def stream_of(request):
    return STREAMS[request.param]


def test_a_reading_agent_gets_every_change_and_keep_alive(stream_of):
    peer = SlowPeer()
    stream = stream_of(peer)
    for _ in range(3):
        stream.tools_changed()
        stream.keep_alive()
    assert kinds(peer) == ["change", "keep-alive"] * 3


def test_an_unread_stream_holds_one_change_however_many_come(stream_of):
    peer = SlowPeer()
    stream = stream_of(peer)
    peer.unread = True
    for _ in range(50_000):
        stream.tools_changed()
        stream.keep_alive()
    assert kinds(peer) == ["change"]


def test_a_change_after_an_unsent_keep_alive_is_still_written(stream_of):
    """Only a list_changed covers a list_changed: one queued behind a keep-alive is sent."""
    peer = SlowPeer()
    stream = stream_of(peer)
    stream.keep_alive()
    peer.unread = True
    stream.tools_changed()
    stream.tools_changed()
    assert kinds(peer) == ["keep-alive", "change"]


def test_once_the_agent_has_read_a_change_the_next_is_written(stream_of):
    peer = SlowPeer()
    stream = stream_of(peer)
    peer.unread = True
    stream.tools_changed()
    peer.unread = False  # the agent took it
    stream.tools_changed()
    assert kinds(peer) == ["change", "change"]
