"""The net layer's `Link` for a WebSocket: coalesced writes, and replies that leave at once."""

from __future__ import annotations

from types import SimpleNamespace

from clientmcp_fast.core.counters import Counters
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.net.websocket import READ_TURN_BYTES, Links, WebSocketProtocol


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


def fake_server(soon: list, limits: Limits | None = None) -> SimpleNamespace:
    """A server as its WebSocket links see it, whose loop hands what it should call next turn to `soon`."""
    server = SimpleNamespace(
        limits=limits or Limits(),
        time=lambda: 0.0,
        loop=SimpleNamespace(call_soon=soon.append),
        bridge=SimpleNamespace(counters=Counters()),
        websocket_closed=lambda protocol: None,
    )
    server.links = Links(server)  # type: ignore[arg-type]
    return server


def link_on(server: SimpleNamespace) -> tuple[WebSocketProtocol, Transport]:
    """A WebSocketProtocol of `server`, and its transport."""
    transport = Transport()
    return WebSocketProtocol(server, transport), transport  # type: ignore[arg-type]


def link() -> tuple[WebSocketProtocol, Transport, list]:
    """A WebSocketProtocol whose write queue hands its flush to `scheduled` rather than to a loop."""
    scheduled: list = []
    return (*link_on(fake_server(scheduled)), scheduled)


def test_writes_of_one_turn_leave_as_one_write_at_its_end():
    protocol, transport, scheduled = link()
    protocol.write(b"a")
    protocol.write(b"b")
    assert transport.writes == [] and len(scheduled) == 1
    scheduled.pop()()
    assert transport.writes == [b"ab"]


def test_one_flush_per_turn_serves_every_websocket_that_wrote():
    scheduled: list = []
    server = fake_server(scheduled)
    (first, first_transport), (second, second_transport) = link_on(server), link_on(server)
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

    def overflowed(self, now: float) -> None:
        self.events.append("overflowed")


def test_unsent_data_past_the_soft_limit_congests_and_past_the_hard_limit_overflows():
    transport = UnreadTransport()
    server = fake_server([], Limits(app_soft_bytes=100, app_hard_bytes=300))
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


class ReadingTransport(Transport):
    """A transport that records whether reading is paused, as the protocol asks."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = True
        self.closing = False

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closing


class FeedRecorder:
    """A session that keeps every piece of input it is given."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def receive_data(self, data: bytes, now: float) -> None:
        self.pieces.append(data)

    def connection_lost(self, now: float) -> None: ...


def reading_link() -> tuple[WebSocketProtocol, ReadingTransport, FeedRecorder, list]:
    """A WebSocketProtocol on a ReadingTransport; `soon` holds what it asked the loop to call next turn."""
    soon: list = []
    transport = ReadingTransport()
    protocol = WebSocketProtocol(fake_server(soon), transport)  # type: ignore[arg-type]
    session = FeedRecorder()
    protocol.session = session  # type: ignore[assignment]
    return protocol, transport, session, soon


def test_a_small_read_goes_to_the_session_at_once():
    protocol, transport, session, soon = reading_link()
    protocol.data_received(b"x" * READ_TURN_BYTES)
    assert session.pieces == [b"x" * READ_TURN_BYTES] and soon == [] and transport.reading


def test_a_large_read_goes_a_slice_per_loop_turn_with_reading_paused():
    protocol, transport, session, soon = reading_link()
    data = bytes(range(256)) * (READ_TURN_BYTES * 3 // 256) + b"tail"
    protocol.data_received(data)
    assert session.pieces == [data[:READ_TURN_BYTES]] and not transport.reading
    turns = 0
    while soon:
        soon.pop()()
        turns += 1
    assert turns == 3 and transport.reading
    assert b"".join(session.pieces) == data
    assert all(len(piece) <= READ_TURN_BYTES for piece in session.pieces)


def test_a_large_read_stops_when_the_connection_is_lost():
    protocol, transport, session, soon = reading_link()
    protocol.data_received(b"x" * (READ_TURN_BYTES * 2))
    protocol.connection_lost(None)
    soon.pop()()
    assert session.pieces == [b"x" * READ_TURN_BYTES] and soon == []
