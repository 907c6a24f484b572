"""The net layer's `Link` for a WebSocket: coalesced writes, and replies that leave at once."""

from __future__ import annotations

from types import SimpleNamespace

from clientmcp_fast.core.limits import Limits
from clientmcp_fast.net.websocket import WebSocketProtocol, WriteQueue


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


def link_on(writes: WriteQueue) -> tuple[WebSocketProtocol, Transport]:
    """A WebSocketProtocol of a server whose write queue is `writes`, and its transport."""
    transport = Transport()
    server = SimpleNamespace(limits=Limits(), time=lambda: 0.0, writes=writes)
    return WebSocketProtocol(server, transport), transport  # type: ignore[arg-type]


def link() -> tuple[WebSocketProtocol, Transport, list]:
    """A WebSocketProtocol whose write queue hands its flush to `scheduled` rather than to a loop."""
    scheduled: list = []
    return (*link_on(WriteQueue(scheduled.append)), scheduled)


def test_writes_of_one_turn_leave_as_one_write_at_its_end():
    protocol, transport, scheduled = link()
    protocol.write(b"a")
    protocol.write(b"b")
    assert transport.writes == [] and len(scheduled) == 1
    scheduled.pop()()
    assert transport.writes == [b"ab"]


def test_one_flush_per_turn_serves_every_websocket_that_wrote():
    scheduled: list = []
    writes = WriteQueue(scheduled.append)
    (first, first_transport), (second, second_transport) = link_on(writes), link_on(writes)
    transports = [first_transport, second_transport]
    first.write(b"1")
    second.write(b"2")
    first.write(b"3")
    assert len(scheduled) == 1  # one callback for the turn, not one per connection or frame
    scheduled.pop()()
    assert [t.writes for t in transports] == [[b"13"], [b"2"]]
    second.write(b"4")  # the next turn schedules afresh
    assert len(scheduled) == 1
    scheduled.pop()()
    assert transports[1].writes == [b"2", b"4"]


def test_a_reply_with_nothing_queued_leaves_at_once():
    protocol, transport, scheduled = link()
    protocol.write_now(b"pong")
    assert transport.writes == [b"pong"] and scheduled == []


def test_a_reply_after_queued_writes_waits_and_keeps_the_order():
    protocol, transport, _ = link()
    protocol.write(b"call")
    protocol.write_now(b"pong")
    assert transport.writes == []
    protocol.flush()
    assert transport.writes == [b"callpong"]


class UnreadTransport(Transport):
    """A transport whose peer reads nothing: as asyncio's do, its write calls pause_writing past the high mark."""

    def __init__(self) -> None:
        super().__init__()
        self.protocol: WebSocketProtocol | None = None
        self.high = 0
        self.paused = False

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        self.high = high

    def write(self, data: bytes) -> None:
        super().write(data)
        if self.get_write_buffer_size() > self.high and not self.paused:
            self.paused = True
            self.protocol.pause_writing()

    def get_write_buffer_size(self) -> int:
        return sum(map(len, self.writes))


class RecordingSession:
    """The link's session, keeping what the link told it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def congested(self, now: float) -> None:
        self.events.append("congested")

    def overflowed(self) -> None:
        self.events.append("overflowed")


def test_unsent_data_past_the_soft_limit_congests_and_past_the_hard_limit_overflows():
    transport = UnreadTransport()
    server = SimpleNamespace(
        limits=Limits(app_soft_bytes=100, app_hard_bytes=300),
        time=lambda: 0.0,
        writes=WriteQueue([].append),
        loop=SimpleNamespace(time=lambda: 0.0),
    )
    protocol = WebSocketProtocol(server, transport)  # type: ignore[arg-type]
    transport.protocol = protocol
    protocol.session = session = RecordingSession()  # type: ignore[assignment]
    protocol.write_now(b"x" * 100)
    assert session.events == []  # at the soft limit, not past it
    protocol.write_now(b"x")
    assert session.events == ["congested"]
    protocol.write_now(b"x" * 199)
    assert session.events == ["congested"]  # at the hard limit
    protocol.write_now(b"x")
    assert session.events == ["congested", "overflowed"]  # past it, at once
