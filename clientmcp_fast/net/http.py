"""HTTP/1.1 connections on httptools: parse, queue pipelined requests, answer in order, hand off upgrades.

The protocol object is the parser's callback object. Requests are answered one at a
time in arrival order; up to `max_pipelined` wait parsed, then reading pauses. What a
request means is decided elsewhere: `/mcp` by the agent endpoint, `/connect` by the
client channel; this module only frames bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

import httptools

from clientmcp_fast.core.channel import client_channel_handshake
from clientmcp_fast.core.http import (
    LAST_CHUNK,
    TEXT_PLAIN,
    Headers,
    Request,
    chunk,
    plain_response,
    response_head,
)
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.websocket import HandshakeError, accept_response, check_upgrade
from clientmcp_fast.log import logger, redact_target
from clientmcp_fast.speedups import ROUTE_CONNECT, ROUTE_ECHO, ROUTE_HEALTHZ, ROUTE_MCP, route

if TYPE_CHECKING:
    from clientmcp_fast.net.server import Server

_PENDING, _STREAMING, _DONE = 0, 1, 2
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_ALLOW_GET = ((b"allow", b"GET"),)


class _Refused(Exception):
    """Raised from a parser callback to stop parsing; the connection answers `status` and closes."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(status, text)
        self.status = status
        self.text = text


class HttpExchange:
    """One request being answered on a connection: the core's `Exchange` port."""

    __slots__ = ("request", "on_abandon", "_conn", "_state")

    def __init__(self, conn: HttpProtocol, request: Request) -> None:
        self.request = request
        self.on_abandon = None
        self._conn = conn
        self._state = _PENDING

    def respond(self, status: int, headers: Headers, body: bytes) -> None:
        if self._state != _PENDING:
            return
        self._state = _DONE
        self.on_abandon = None
        close = self._conn.must_close(self.request)
        head = response_head(status, headers, len(body), close)
        # RFC 9110 §9.3.2: a HEAD answer has the head a GET would get, and no content.
        self._conn.finish(self, head if self.request.method == b"HEAD" else head + body, close)

    def start_stream(self, headers: Headers) -> None:
        if self._state != _PENDING:
            return
        self._state = _STREAMING
        self._conn.write(response_head(200, headers, None, self._conn.must_close(self.request)))

    def stream(self, data: bytes) -> None:
        if self._state == _STREAMING:
            self._conn.write(chunk(data))

    def end_stream(self) -> None:
        if self._state != _STREAMING:
            return
        self._state = _DONE
        self.on_abandon = None
        self._conn.finish(self, LAST_CHUNK, self._conn.must_close(self.request))


class HttpProtocol(asyncio.Protocol):
    """One HTTP/1.1 connection from an agent (or from an app, until its upgrade)."""

    __slots__ = (
        "server",
        "transport",
        "parser",
        "deadline",
        "_target",
        "_headers",
        "_repeated",
        "_body",
        "_body_size",
        "_head_bytes",
        "_head_unparsed",
        "_in_head",
        "_queue",
        "_current",
        "_serving",
        "_stopped",
        "_closed",
        "_pipeline_paused",
        "_write_paused",
        "_upgrade",
        "_refusal",
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.parser = httptools.HttpRequestParser(self)
        self.deadline: float | None = None
        self._target = b""
        self._headers: dict[bytes, bytes] = {}
        self._repeated: set[bytes] = set()
        self._body: list[bytes] = []
        self._body_size = 0
        self._head_bytes = 0
        self._head_unparsed = 0
        self._in_head = False
        self._queue: deque[Request] = deque()
        self._current: HttpExchange | None = None
        self._serving = False
        self._stopped = False  # parsing stopped: an upgrade, or a request we refused
        self._closed = False
        self._pipeline_paused = False
        self._write_paused = False
        self._upgrade: tuple[Request, bytes] | None = None  # a WebSocket upgrade and the bytes after it
        self._refusal: tuple[int, str] | None = None  # answered after the requests before it

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        server = self.server
        if not server.admit_http(self):
            transport.close()
            self._closed = True
            return
        self.deadline = server.loop.time() + server.limits.head_timeout

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.server.http_connections.discard(self)
        current = self._current
        if current is not None and current.on_abandon is not None:
            abandon = current.on_abandon
            current.on_abandon = None
            abandon()

    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return
        was_in_head = self._in_head
        try:
            while True:
                try:
                    self.parser.feed_data(data)
                    break
                except httptools.HttpParserUpgrade as upgrade:
                    data = data[upgrade.args[0] :]
                    if self._take_upgrade(data):
                        break
                    if not data:
                        break
        except httptools.HttpParserError as error:
            context = error.__context__
            if isinstance(context, _Refused):
                self._refuse(context.status, context.text)
            else:
                self._refuse(400, "malformed HTTP request")
            self._serve()
            return
        if was_in_head and self._in_head:
            # The whole chunk belongs to a head that is still not complete.
            self._head_unparsed += len(data)
            if self._head_unparsed + self._head_bytes > self.server.limits.max_head_bytes:
                self._refuse(431, "request head larger than the limit")
        self._serve()

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        # An agent that does not read gets nothing more parsed until it catches up.
        self._write_paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._pipeline_paused and not self._stopped:
            self.transport.resume_reading()

    # -- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._stopped:
            return
        self._in_head = True
        self._target = b""
        self._headers = {}
        self._repeated = set()
        self._body = []
        self._body_size = 0
        self._head_bytes = 0
        self._head_unparsed = 0
        if self._current is None and not self._queue:
            self.deadline = self.server.loop.time() + self.server.limits.head_timeout

    def on_url(self, url: bytes) -> None:
        self._target += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        name = name.lower()
        headers = self._headers
        if name in headers:
            self._repeated.add(name)
            headers[name] += b", " + value
        else:
            headers[name] = value

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.server.limits.max_head_bytes:
            raise _Refused(431, "request head larger than the limit")

    def on_headers_complete(self) -> None:
        if self._stopped:
            return
        self._in_head = False
        parser = self.parser
        if parser.get_http_version() not in ("1.1", "1.0"):
            raise _Refused(505, "only HTTP/1.1 is served")
        headers = self._headers
        encoding = headers.get(b"transfer-encoding")
        if encoding is not None and encoding.strip().lower() != b"chunked":
            raise _Refused(501, "only the chunked transfer coding is supported")
        length = headers.get(b"content-length")
        if length is not None and int(length) > MAX_MESSAGE_BYTES:
            # Answered now, without reading the body; the connection closes after the answer.
            self._enqueue(None)
            self._stop()
            return
        if headers.get(b"expect", b"").lower() == b"100-continue" and self._current is None and not self._queue:
            self.transport.write(_CONTINUE)
        self.deadline = self.server.loop.time() + self.server.limits.keepalive_timeout

    def on_body(self, body: bytes) -> None:
        if self._stopped:
            return
        self._body_size += len(body)
        if self._body_size > MAX_MESSAGE_BYTES:
            # Answered as too large; the parser may go on through this chunk, unheard.
            self._body = []
            self._enqueue(None)
            self._stop()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._stopped:
            return
        body = self._body
        self._enqueue(body[0] if len(body) == 1 else b"".join(body))

    # -- requests in, answers out -----------------------------------------------------------

    def _enqueue(self, body: bytes | None) -> None:
        parser = self.parser
        request = Request(
            parser.get_method(),
            self._target,
            self._headers,
            self._repeated,
            body,
            body is not None and parser.should_keep_alive(),
        )
        self._queue.append(request)
        self.deadline = None
        if len(self._queue) >= self.server.limits.max_pipelined and not self._pipeline_paused:
            self._pipeline_paused = True
            self.transport.pause_reading()

    def _take_upgrade(self, tail: bytes) -> bool:
        """After an upgrade request: whether it is a WebSocket upgrade we hand off (parsing stops)."""
        request = self._queue[-1] if self._queue else None
        if request is None or request.method != b"GET":
            return False
        kind, _ = route(request.target)
        if kind != ROUTE_CONNECT and not (kind == ROUTE_ECHO and self.server.settings.websocket_echo):
            return False
        self._upgrade = (request, tail)
        self._stop()
        return True

    def _stop(self) -> None:
        self._stopped = True
        self.transport.pause_reading()

    def _serve(self) -> None:
        if self._serving:
            return
        self._serving = True
        try:
            queue = self._queue
            while self._current is None and not self._closed:
                if not queue:
                    if self._refusal is not None:
                        status, text = self._refusal
                        self.transport.write(plain_response(status, text, close=True))
                        self._close()
                    break
                request = queue.popleft()
                if self._pipeline_paused and len(queue) < self.server.limits.max_pipelined:
                    self._pipeline_paused = False
                    if not self._write_paused and not self._stopped:
                        self.transport.resume_reading()
                exchange = HttpExchange(self, request)
                self._current = exchange
                self._dispatch(exchange)
        finally:
            self._serving = False
        if self._current is None and not self._queue and not self._closed and not self._in_head:
            self.deadline = self.server.loop.time() + self.server.limits.keepalive_timeout

    def _dispatch(self, exchange: HttpExchange) -> None:
        request = exchange.request
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s", request.method.decode("latin-1"), redact_target(request.target))
        kind, token = route(request.target)
        if kind == ROUTE_MCP:
            self.server.agents.handle(exchange, token, self.server.loop.time())
        elif kind == ROUTE_CONNECT:
            self._websocket(exchange, echo=False)
        elif kind == ROUTE_HEALTHZ:
            if request.method == b"GET":
                exchange.respond(200, (TEXT_PLAIN,), b"ok")
            else:
                self._plain(exchange, 405, "use GET", _ALLOW_GET)
        elif kind == ROUTE_ECHO and self.server.settings.websocket_echo:
            self._websocket(exchange, echo=True)
        else:
            self._plain(exchange, 404, "not found: the bridge serves /connect, /mcp and /healthz")

    def _plain(self, exchange: HttpExchange, status: int, text: str, extra: Headers = ()) -> None:
        data = plain_response(status, text, extra, self.must_close(exchange.request))
        if exchange.request.method == b"HEAD":
            data = data[: data.index(b"\r\n\r\n") + 4]  # no content in a HEAD answer (RFC 9110 §9.3.2)
        exchange._state = _DONE
        self.finish(exchange, data, self.must_close(exchange.request))

    def _websocket(self, exchange: HttpExchange, echo: bool) -> None:
        request = exchange.request
        if request.method != b"GET":
            self._plain(exchange, 405, "use GET with a WebSocket upgrade", _ALLOW_GET)
            return
        upgrade = self._upgrade
        try:
            if upgrade is None or upgrade[0] is not request:
                # Not an upgrade as far as HTTP goes: say precisely what is missing.
                check_upgrade(request.headers)
                raise HandshakeError(400, "Connection header must include Upgrade")
            if echo:
                response, token = accept_response(check_upgrade(request.headers), None), None
            else:
                response, token = client_channel_handshake(request.headers)
        except HandshakeError as error:
            request.keep_alive = False
            self._plain(exchange, error.status, error.reason, error.headers)
            return
        if self.server.shutting_down:
            request.keep_alive = False
            self._plain(exchange, 503, "the bridge is shutting down")
            return
        exchange._state = _DONE
        self._current = None
        self._closed = True  # as an HTTP connection: the transport now belongs to the WebSocket
        self.server.http_connections.discard(self)
        self.transport.write(response)
        self.server.hand_off(self.transport, token, upgrade[1], echo)

    def _refuse(self, status: int, text: str) -> None:
        """Refuse what follows the requests parsed so far, then close: the byte stream is unusable."""
        self._refusal = (status, text)
        self._in_head = False
        self._stop()

    def must_close(self, request: Request) -> bool:
        """Whether the connection ends after answering `request`."""
        # While shutting down, requests already queued are still answered, the last one closing.
        return not request.keep_alive or (self.server.shutting_down and not self._queue)

    def write(self, data: bytes) -> None:
        if not self._closed:
            self.transport.write(data)

    def finish(self, exchange: HttpExchange, data: bytes, close: bool) -> None:
        """The last bytes of `exchange`'s answer; then the next queued request, or the end."""
        if self._closed:
            return
        self.transport.write(data)
        if self._current is exchange:
            self._current = None
        if close:
            self._close()
        elif not self._serving:
            self._serve()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self.server.http_connections.discard(self)
            self.transport.close()

    def expire(self) -> None:
        """The head, body or keep-alive timeout passed: close without an answer (BRIDGE.md §6)."""
        self.deadline = None
        self._close()

    def shutdown(self) -> None:
        """The bridge stops: idle connections close now; a request begun is still answered, then closes."""
        if self._current is None and not self._queue and not self._in_head:
            self._close()
