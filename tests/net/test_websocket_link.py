"""The net layer's `Link` for a WebSocket: coalesced writes, and replies that leave at once."""

from __future__ import annotations

from types import SimpleNamespace

from clientmcp_fast.core.limits import Limits
from clientmcp_fast.net.websocket import WebSocketProtocol


class Transport:
    """Keeps each `write` as one item: what reaches the socket, and in how many writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int, low: int) -> None: ...


def link() -> tuple[WebSocketProtocol, Transport, list]:
    transport, dirty = Transport(), []
    server = SimpleNamespace(limits=Limits(), time=lambda: 0.0, flush_soon=dirty.append)
    return WebSocketProtocol(server, transport), transport, dirty  # type: ignore[arg-type]


def test_writes_of_one_turn_leave_as_one_write_at_its_end():
    protocol, transport, dirty = link()
    protocol.write(b"a")
    protocol.write(b"b")
    assert transport.writes == [] and dirty == [protocol]
    protocol.flush()
    assert transport.writes == [b"ab"]


def test_a_reply_with_nothing_queued_leaves_at_once():
    protocol, transport, dirty = link()
    protocol.write_now(b"pong")
    assert transport.writes == [b"pong"] and dirty == []


def test_a_reply_after_queued_writes_waits_and_keeps_the_order():
    protocol, transport, dirty = link()
    protocol.write(b"call")
    protocol.write_now(b"pong")
    assert transport.writes == []
    protocol.flush()
    assert transport.writes == [b"callpong"]
