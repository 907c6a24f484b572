"""The transport side of an accepted WebSocket: bytes to the core, its output out once per loop turn."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from clientmcp_fast.core.websocket import Link

if TYPE_CHECKING:
    from clientmcp_fast.net.server import Server

# How long a closing connection waits for the peer's close frame (or for its unsent
# data to drain) before the transport is aborted.
CLOSE_WAIT_SECONDS = 3.0

# uvloop reads a socket into a 256,000-byte buffer, again and again in one loop turn while
# each read fills it: one app's burst of registers was read and handled before any other
# client was served (docs/benchmarks.md, Register bursts). So a read larger than this goes to
# the session a slice per loop turn, with reading paused meanwhile: one app costs any turn at
# most this much input, a short slice of registers or pings.
READ_TURN_BYTES = 64 * 1024


class Session(Protocol):
    """What runs on the WebSocket: the client channel (`AppChannel`) or the test echo."""

    def open(self, token: str | None, now: float) -> None: ...

    def receive_data(self, data: bytes, now: float) -> None: ...

    def connection_lost(self, now: float) -> None: ...

    def congested(self, now: float) -> None: ...

    def drained(self) -> None: ...

    def overflowed(self, now: float) -> None: ...


class Links:
    """What the WebSocket links of one server share, and the ones with frames to write this loop turn.

    Held once per server rather than copied into every connection: an idle app costs
    its connection's fields, and these are the same for all (docs/benchmarks.md, Idle footprint).
    """

    __slots__ = ("server", "loop", "time", "counters", "soft_bytes", "hard_bytes", "_dirty", "_flush")

    def __init__(self, server: Server) -> None:
        self.server = server
        self.loop = server.loop
        self.time = server.time  # one bound method for all connections
        self.counters = server.bridge.counters  # bytes in and out (docs/operations.md)
        # pause_writing above the soft limit (new calls get "busy"), resume below half of it.
        self.soft_bytes: int = server.limits.app_soft_bytes
        self.hard_bytes: int = server.limits.app_hard_bytes
        self._dirty: list[WebSocketProtocol] = []
        self._flush = self.flush  # one bound method, not one per loop turn

    def write_later(self, protocol: WebSocketProtocol) -> None:
        """`protocol` has frames queued: write them at the end of this loop turn."""
        dirty = self._dirty
        dirty.append(protocol)
        if len(dirty) == 1:
            self.loop.call_soon(self._flush)  # after this turn's reads

    def flush(self) -> None:
        """Write what every queued WebSocket holds, one `transport.write` each."""
        dirty = self._dirty
        self._dirty = []
        for protocol in dirty:
            protocol.flush()


class WebSocketProtocol(Link):
    """Owns the transport of one WebSocket and is the core's `Link`: writes are coalesced.

    An asyncio protocol by its methods, not by inheritance (asyncio and uvloop call them by
    name): a class compiled as a cdef class (websocket.pxd) cannot derive from a Python class.
    """

    __slots__ = ("transport", "session", "_links", "_out", "_close_timer", "_unfed", "_paused", "index")

    def __init__(self, server: Server, transport: asyncio.Transport) -> None:
        links: Links = server.links
        self.transport = transport
        self.session: Session = None  # type: ignore[assignment]
        self._links = links
        self._out: list[bytes] | None = None
        self._close_timer: asyncio.TimerHandle | None = None
        self._unfed: memoryview | None = None  # the rest of a large read, still to give the session
        self._paused = False  # the transport holds more than the soft limit (pause_writing)
        self.index = -1  # its place in `server.websockets` while listed there
        transport.set_write_buffer_limits(high=links.soft_bytes, low=links.soft_bytes // 2)

    def start(self, session: Session, token: str | None, tail: bytes) -> None:
        """Run `session` on this connection, fed first with what arrived after the handshake."""
        self.session = session
        now = self._links.time()
        session.open(token, now)
        if tail:
            session.receive_data(tail, now)
        self.transport.resume_reading()

    # -- asyncio.Protocol -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        links = self._links
        links.counters.websocket_bytes_in += len(data)
        if len(data) <= READ_TURN_BYTES:
            self.session.receive_data(data, links.time())
            return
        self.transport.pause_reading()
        self._unfed = memoryview(data)
        self._feed_slice()

    def _feed_slice(self) -> None:
        """Give the session the next slice of a large read; the rest in a later loop turn."""
        unfed = self._unfed
        if unfed is None:
            return  # the connection is gone
        self.session.receive_data(bytes(unfed[:READ_TURN_BYTES]), self._links.time())
        if len(unfed) > READ_TURN_BYTES and not self.transport.is_closing():
            self._unfed = unfed[READ_TURN_BYTES:]
            self._links.loop.call_soon(self._feed_slice)
            return
        self._unfed = None
        if not self.transport.is_closing():
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._close_timer is not None:
            self._close_timer.cancel()
            self._close_timer = None
        self._out = None
        self._unfed = None
        self.session.connection_lost(self._links.time())
        self._links.server.websocket_closed(self)

    def pause_writing(self) -> None:
        self._paused = True
        self.session.congested(self._links.time())

    def resume_writing(self) -> None:
        self._paused = False
        self.session.drained()

    # -- Link -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        out = self._out
        if out is None:
            self._out = [data]
            self._links.write_later(self)
        else:
            out.append(data)

    def write_now(self, data: bytes) -> None:
        if self._out is None:
            self._send(data)
        else:
            self._out.append(data)  # after what is queued, in order

    def flush(self) -> None:
        """Write everything queued in this loop turn as one `transport.write`."""
        out = self._out
        if out is None:
            return
        self._out = None
        self._send(out[0] if len(out) == 1 else b"".join(out))

    def _send(self, data: bytes) -> None:
        transport = self.transport
        if transport.is_closing():
            return
        links = self._links
        links.counters.websocket_bytes_out += len(data)
        transport.write(data)
        # The hard limit is at least the soft one, past which the transport has called
        # pause_writing (within that write): unpaused, there is no size to ask for.
        if self._paused and transport.get_write_buffer_size() > links.hard_bytes:
            self.session.overflowed(links.time())

    def end(self, wait_for_peer: bool) -> None:
        self.flush()
        if not wait_for_peer:
            # Half-close and drop what still arrives until the peer closes too: closing with
            # unread input (the rest of a refused 4 MiB frame) resets the connection, and the
            # reset can destroy our close frame before the peer reads it.
            if self.transport.can_write_eof():
                self.transport.write_eof()
            else:
                self.transport.close()
        if self._close_timer is None:
            # close() waits for unsent data to drain: an app that does not read would hold the
            # socket forever, so the wait is bounded.
            self._close_timer = self._links.loop.call_later(CLOSE_WAIT_SECONDS, self.transport.abort)
