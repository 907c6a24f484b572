"""HTTP/1.1 connections: queue pipelined requests, answer them in order, time them out, hand off upgrades.

Parsing is the `RequestReader`'s (a `_speedups` hot path). Requests are answered one at a
time in arrival order; up to `max_pipelined` wait parsed, then reading pauses. What a
request means is decided elsewhere: `/mcp` by the agent endpoint, `/connect` by the
client channel; this module only frames bytes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from clientmcp_fast import log
from clientmcp_fast.core.http import (
    HOST,
    LAST_CHUNK,
    TEXT_PLAIN,
    Exchange,
    Headers,
    Request,
    chunk,
    plain_response,
    response_head,
    response_message,
)
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.websocket import HandshakeError, check_upgrade
from clientmcp_fast.log import logger, redact_target
from clientmcp_fast.speedups import (
    EXPECTS_CONTINUE,
    READING_BODY,
    READING_HEAD,
    REFUSED,
    ROUTE_APP,
    ROUTE_CONNECT,
    ROUTE_HEALTHZ,
    ROUTE_MCP,
    STOPPED,
    RequestReader,
    route,
)

if TYPE_CHECKING:
    from clientmcp_fast.core.agent import AgentEndpoint
    from clientmcp_fast.net.server import Server

_PENDING, _STREAMING, _DONE = 0, 1, 2
# What a connection's deadline is timing: nothing (an answer is owed), a head, a body, idleness.
_BUSY, _HEAD, _BODY, _IDLE = 0, 1, 2, 3
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_ALLOW_GET = ((b"allow", b"GET"),)


class HttpExchange(Exchange):
    """One request being answered on a connection: the core's `Exchange` port."""

    __slots__ = ("_conn", "_state")

    def init_exchange(self, conn: HttpProtocol, request: Request) -> None:
        """Set the fields of an exchange made with `HttpExchange.__new__(HttpExchange)` (see `_serve`)."""
        self.request = request
        self.on_abandon = None
        self._conn = conn
        self._state = _PENDING

    def respond(self, status: int, headers: Headers, body: bytes) -> None:
        if self._state != _PENDING:
            return
        self._state = _DONE
        self.on_abandon = None
        conn = self._conn
        conn._counters.responded(status)
        request = self.request
        close = conn.must_close(request)
        # RFC 9110 §9.3.2: a HEAD answer has the head a GET would get, and no content.
        self._conn.finish(
            self, response_message(status, headers, body, close, request.method != b"HEAD"), close
        )

    def start_stream(self, headers: Headers) -> None:
        if self._state != _PENDING:
            return
        self._state = _STREAMING
        self._conn._counters.responded(200)
        request = self.request
        if request.http11:
            self._conn.write(response_head(200, headers, self._conn.must_close(request)))
        else:
            # HTTP/1.0 has no chunked coding (RFC 9112 §6.3): the body ends when the connection does.
            request.keep_alive = False
            self._conn.write(response_head(200, headers, True, chunked=False))

    def stream(self, data: bytes) -> None:
        if self._state == _STREAMING:
            self._conn.write(chunk(data) if self.request.http11 else data)

    def backlog(self) -> int:
        return self._conn.transport.get_write_buffer_size()

    def end_stream(self) -> None:
        if self._state != _STREAMING:
            return
        self._state = _DONE
        self.on_abandon = None
        request = self.request
        self._conn.finish(self, LAST_CHUNK if request.http11 else b"", self._conn.must_close(request))


class HttpProtocol:
    """One HTTP/1.1 connection from an agent (or from an app, until its upgrade).

    An asyncio protocol by its methods, not by inheritance (asyncio and uvloop call them by
    name): a class compiled as a cdef class (http.pxd) cannot derive from a Python class.
    """

    __slots__ = (
        "server",
        "transport",
        "reader",
        "deadline",
        "_agents",
        "_max_pipelined",
        "_head_timeout",
        "_keepalive_timeout",
        "_time",
        "_reading",
        "_phase",
        "_queue",
        "_current",
        "_serving",
        "_closed",
        "_pipeline_paused",
        "_write_paused",
        "_draining",
        "_log_requests",
        "_counters",
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        limits = server.limits
        # Read per request, so kept here rather than looked up on the server each time.
        self._agents: AgentEndpoint = server.agents
        self._max_pipelined: int = limits.max_pipelined
        self._head_timeout: float = limits.head_timeout
        self._keepalive_timeout: float = limits.keepalive_timeout
        self._time = server.loop.time
        self._queue: deque[Request] = deque()
        self.reader = RequestReader(self._queue, Request, limits.max_head_bytes, MAX_MESSAGE_BYTES)
        # The reader's state as `feed` last returned it (bits): read per request, where its
        # attributes would each be an attribute lookup.
        self._reading = 0
        self.deadline: float | None = None
        self._phase = _BUSY  # what `deadline` times: see _arm
        self._current: HttpExchange | None = None
        self._serving = False
        self._closed = False
        self._pipeline_paused = False
        self._write_paused = False
        self._draining = False  # the bridge is shutting down: set by `shutdown`, read per answer
        # The log level is set at startup: read once here, not as a module attribute per request.
        self._log_requests: bool = log.debug_enabled
        self._counters = server.bridge.counters  # HTTP responses by status (docs/operations.md)

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        if not self.server.admit_http(self):
            transport.close()
            self._closed = True
            return
        self._phase = _HEAD  # a new connection has the head timeout to send its first request
        self.deadline = self._time() + self._head_timeout

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.server.http_connections.discard(self)
        current = self._current
        if current is not None and current.on_abandon is not None:
            abandon = current.on_abandon
            current.on_abandon = None
            abandon(self._time())

    def data_received(self, data: bytes) -> None:
        self._counters.http_bytes_in += len(data)
        self._reading = reading = self.reader.feed(data)
        queue = self._queue
        if reading & EXPECTS_CONTINUE:
            self.reader.expect_continue = False
            self._reading = reading & ~EXPECTS_CONTINUE
            if self._current is None and not queue:
                self.transport.write(_CONTINUE)
        if len(queue) >= self._max_pipelined and not self._pipeline_paused:
            self._pipeline_paused = True
            self.transport.pause_reading()
        elif reading & STOPPED:
            self.transport.pause_reading()
        self._serve()

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        # An agent that does not read gets nothing more parsed, nor answered, until it catches up.
        self._write_paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._pipeline_paused and not self.reader.stopped:
            self.transport.resume_reading()
        self._serve()

    # -- requests in, answers out -----------------------------------------------------------

    def _arm(self) -> None:
        """Set the one timeout that applies now (docs/configuration.md); the clock is read only on a change."""
        if self._current is not None or self._queue or self._closed:
            # An answer is owed: no timeout.
            if self._phase != _BUSY:
                self._phase = _BUSY
                self.deadline = None
            return
        reading = self._reading
        phase = _HEAD if reading & READING_HEAD else _BODY if reading & READING_BODY else _IDLE
        if phase != self._phase:
            self._phase = phase
            self.deadline = self._time() + (self._head_timeout if phase == _HEAD else self._keepalive_timeout)

    def _serve(self) -> None:
        if self._serving:
            return
        self._serving = True
        try:
            queue = self._queue
            # Paused writing: the agent has not read the answers so far, so the next pipelined
            # request waits (resume_writing serves it): unread answers are one at a time.
            while self._current is None and not self._closed and not self._write_paused:
                if not queue:
                    if self._reading & REFUSED:
                        refusal = self.reader.refusal
                        self.transport.write(plain_response(refusal[0], refusal[1], close=True))
                        self._close()
                    break
                request = queue.popleft()
                if self._pipeline_paused and len(queue) < self._max_pipelined:
                    self._pipeline_paused = False
                    if not self._write_paused and not self.reader.stopped:
                        self.transport.resume_reading()
                # Compiled, __new__ and init_exchange are C calls, where calling the class parses arguments.
                exchange = HttpExchange.__new__(HttpExchange)
                exchange.init_exchange(self, request)
                self._current = exchange
                self._dispatch(exchange)
        finally:
            self._serving = False
        self._arm()

    def _dispatch(self, exchange: HttpExchange) -> None:
        request = exchange.request
        if self._log_requests:
            logger.debug("%s %s", request.method.decode("latin-1"), redact_target(request.target))
        if request.http11 and (request.known[HOST] is None or b"host" in request.repeated):
            # RFC 9112 §3.2: an HTTP/1.1 request with no Host, or with two, is refused.
            request.keep_alive = False
            self._plain(exchange, 400, "an HTTP/1.1 request needs exactly one Host header")
            return
        kind, token = route(request.target)
        if kind == ROUTE_MCP:
            self._agents.handle(exchange, token, self._time())
        elif kind == ROUTE_CONNECT:
            self._websocket(exchange)
        elif kind == ROUTE_HEALTHZ:
            if request.method == b"GET":
                exchange.respond(200, (TEXT_PLAIN,), b"ok")
            else:
                self._plain(exchange, 405, "use GET", _ALLOW_GET)
        elif kind == ROUTE_APP and self._agents.handle_resource(exchange, token, self._time()):
            pass  # an app's resource, with the right access token: served as /mcp is (docs/oauth.md)
        else:
            # With --oauth on, its paths (net/oauth.py), and every refusal of an app's resource.
            oauth = self.server.oauth
            if oauth is None or not oauth.handle(exchange, self._time()):
                self._plain(exchange, 404, "not found: the bridge serves /connect, /mcp and /healthz")

    def _plain(self, exchange: HttpExchange, status: int, text: str, extra: Headers = ()) -> None:
        exchange.respond(status, (TEXT_PLAIN, *extra), text.encode() + b"\n")

    def _websocket(self, exchange: HttpExchange) -> None:
        request = exchange.request
        if request.method != b"GET":
            self._plain(exchange, 405, "use GET with a WebSocket upgrade", _ALLOW_GET)
            return
        upgrade = self.reader.upgrade
        try:
            if not request.http11:
                raise HandshakeError(400, "a WebSocket upgrade needs HTTP/1.1 (RFC 6455 §4.1)")
            if upgrade is None or upgrade[0] is not request:
                # Not an upgrade as far as HTTP goes: say precisely what is missing.
                check_upgrade(request.headers)
                raise HandshakeError(400, "Connection header must include Upgrade")
            response, token = self.server.handshake(request.headers)
        except HandshakeError as error:
            request.keep_alive = False
            self._plain(exchange, error.status, error.reason, error.headers)
            return
        if self._draining:
            request.keep_alive = False
            self._plain(exchange, 503, "the bridge is shutting down")
            return
        exchange._state = _DONE
        self._current = None
        self._closed = True  # as an HTTP connection: the transport now belongs to the WebSocket
        self.server.http_connections.discard(self)
        self.transport.write(response)
        self.server.hand_off(self.transport, token, upgrade[1])

    def must_close(self, request: Request) -> bool:
        """Whether the connection ends after answering `request`."""
        # While shutting down, requests already queued are still answered, the last one closing.
        return not request.keep_alive or (self._draining and not self._queue)

    def write(self, data: bytes) -> None:
        if not self._closed:
            self._counters.http_bytes_out += len(data)
            self.transport.write(data)

    def finish(self, exchange: HttpExchange, data: bytes, close: bool) -> None:
        """The last bytes of `exchange`'s answer; then the next queued request, or the end."""
        if self._closed:
            return
        self._counters.http_bytes_out += len(data)
        self.transport.write(data)
        if self._current is exchange:
            self._current = None
        if close:
            self._close()
        elif not self._serving:  # (while serving, the loop in _serve goes on by itself)
            if self._queue or self._reading & REFUSED:
                self._serve()
            else:
                self._arm()  # the common case: nothing waits, the connection is idle again

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self.server.http_connections.discard(self)
            self.transport.close()

    def expire(self) -> None:
        """The head, body or keep-alive timeout passed: close without an answer (docs/configuration.md, Settings)."""
        self.deadline = None
        self._close()

    def shutdown(self) -> None:
        """The bridge stops: idle connections close now; a request begun is still answered, then closes."""
        self._draining = True
        reader = self.reader
        if self._current is None and not self._queue and not reader.in_head and not reader.in_body:
            self._close()
