"""HTTP/1.1 request reading on httptools; the pure-Python twin of `_speedups/http_reader.pyx`.

`RequestReader.feed()` turns the bytes of one connection into requests appended to the
connection's queue, enforcing the head and body limits of docs/configuration.md. It imports
nothing of the bridge: the caller says how a request is made (the core's `Request`) and
what the limits are, as for the frame reader. It is
httptools' callback object, so each header costs a Python call here; the compiled twin
drives llhttp from C, the release httptools 0.9.0 carries, compiled into it from
vendor/llhttp, with no Python call per header. What happens to a request is the
connection's business.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from clientmcp_fast._pure.errors import RequestRefused
from clientmcp_fast._pure.routing import ROUTE_CONNECT, route

# Imported by the first reader made, not with this module: the compiled build takes its
# constants from here and parses with its own llhttp, and would otherwise keep httptools and
# its two extension modules resident for nothing (docs/benchmarks.md, Idle footprint).
httptools: Any = None

# The header names a request keeps by position (`Request.header`, core/http.py) rather than in
# a dict: those the bridge reads, and those most clients send. The reader finds a name here by
# its bytes, so a header the bridge reads costs it no hashing, and a read is an index. Defined
# here, in a module that imports nothing of the bridge, so that both twins read it and the core
# takes it from them (clientmcp_fast.speedups).
KNOWN_NAMES = (
    b"accept",
    b"accept-encoding",
    b"access-control-request-headers",
    b"access-control-request-method",
    b"authorization",
    b"cache-control",
    b"connection",
    b"content-length",
    b"content-type",
    b"expect",
    b"host",
    b"last-event-id",
    b"mcp-method",
    b"mcp-name",
    b"mcp-protocol-version",
    b"mcp-session-id",
    b"origin",
    b"sec-websocket-extensions",
    b"sec-websocket-key",
    b"sec-websocket-protocol",
    b"sec-websocket-version",
    b"traceparent",
    b"tracestate",
    b"transfer-encoding",
    b"upgrade",
    b"user-agent",
)
KNOWN_INDEX = {name: index for index, name in enumerate(KNOWN_NAMES)}
# The positions the reader itself reads by (core/http.py names the bridge's).
CONTENT_LENGTH = KNOWN_INDEX[b"content-length"]
EXPECT = KNOWN_INDEX[b"expect"]
TRANSFER_ENCODING = KNOWN_INDEX[b"transfer-encoding"]

# What `feed` returns: the reader's state once the bytes are parsed, as bits, so that the
# connection reads it from one number rather than from several attributes per request.
READING_HEAD = 1  # in_head
READING_BODY = 2  # in_body
EXPECTS_CONTINUE = 4  # expect_continue
STOPPED = 8  # stopped
REFUSED = 16  # refusal is set


class RequestReader:
    """Parses one connection's requests into its queue; stops at an upgrade or a refusal."""

    __slots__ = (
        "_parser",
        "_queue",
        "_make_request",
        "_max_head",
        "_max_body",
        "_max_body_digits",
        "_target",
        "_known",
        "_others",
        "_repeated",
        "_body",
        "_body_size",
        "_head_bytes",
        "_unreported",
        "_reported",
        "_http11",
        "in_head",
        "in_body",
        "expect_continue",
        "stopped",
        "upgrade",
        "refusal",
    )

    def __init__(
        self, queue: deque, make_request: Callable[..., object], max_head_bytes: int, max_body_bytes: int
    ) -> None:
        """Read into `queue` what `make_request` makes of each request (the core's `Request`), within the limits."""
        global httptools
        if httptools is None:
            import httptools
        self._parser = httptools.HttpRequestParser(self)
        self._queue = queue
        self._make_request = make_request
        self._max_head = max_head_bytes
        self._max_body = max_body_bytes
        self._max_body_digits = len(str(max_body_bytes))  # a length of fewer digits is within the limit
        self._new_message()
        self._reported = False  # a head callback came during the current feed
        self._http11 = True  # the request in progress is HTTP/1.1 (else 1.0)
        self.in_head = False  # a request head has begun and is not complete
        self.in_body = False  # a head is complete and its body is not
        self.expect_continue = False  # the request in progress asked for 100 Continue
        self.stopped = False  # no more parsing: an upgrade, a refusal, or a body too large
        self.upgrade: tuple[object, bytes] | None = None  # a WebSocket upgrade and the bytes after it
        self.refusal: tuple[int, str] | None = None  # answered after the requests before it, then close

    def feed(self, data: bytes) -> int:
        """Parse `data`; complete requests are appended to the queue. The state after it, as bits."""
        if not self.stopped:
            self._parse(data)
        # A head and its body are read one after the other, never both at once.
        state = READING_HEAD if self.in_head else READING_BODY if self.in_body else 0
        if self.expect_continue:
            state |= EXPECTS_CONTINUE
        if self.stopped:
            state |= STOPPED | REFUSED if self.refusal is not None else STOPPED
        return state

    def _parse(self, data: bytes) -> None:
        self._reported = False
        try:
            while True:
                try:
                    self._parser.feed_data(data)
                    break
                except httptools.HttpParserUpgrade as upgrade:
                    data = data[upgrade.args[0] :]
                    if self._hand_off(data) or not data:
                        break
        except httptools.HttpParserError as error:
            context = error.__context__
            if isinstance(context, RequestRefused):
                self._refuse(context.status, context.text)
            elif isinstance(error, httptools.HttpParserCallbackError) and context is not None:
                raise context from None  # a bug or a MemoryError in a callback, not the peer's bytes: not a 400
            else:
                self._refuse(400, "malformed HTTP request")
            return
        if self.in_head and not self._reported:
            # httptools holds an unfinished header line without a callback: the chunks fed since
            # the last callback are all part of it. Bytes after a callback within its own chunk
            # go uncounted, so a head can pass the limit by less than one chunk before the 431.
            self._unreported += len(data)
            if self._head_bytes + self._unreported > self._max_head:
                self._refuse(431, "request head larger than the limit")

    def _hand_off(self, tail: bytes) -> bool:
        """After an upgrade request: whether it is a WebSocket upgrade, which ends HTTP parsing."""
        queue = self._queue
        request = queue[-1] if queue else None
        if request is None or request.method != b"GET":
            return False
        kind, _ = route(request.target)
        if kind != ROUTE_CONNECT:
            return False
        self.upgrade = (request, tail)
        self.stopped = True
        return True

    def _refuse(self, status: int, text: str) -> None:
        self.refusal = (status, text)
        self.in_head = self.in_body = False
        self.stopped = True

    def _new_message(self) -> None:
        """Forget the last request's pieces: a new one begins."""
        self._target = b""
        self._known: list[bytes | None] = [None] * len(KNOWN_NAMES)  # see KNOWN_NAMES
        self._others: dict[bytes, bytes] | None = None
        self._repeated: dict[bytes, list[bytes]] | None = None  # the values of each repeated header
        self._body: list[bytes] = []
        self._body_size = 0
        self._head_bytes = 0  # of the head in progress, as its callbacks report it
        self._unreported = 0  # bytes fed since the last head callback, while in a head

    def _add_request(self, body: bytes | None, keep_alive: bool) -> None:
        """The request read so far joins the queue, with this body."""
        repeated = frozenset(self._repeated) if self._repeated else ()
        self._queue.append(
            self._make_request(
                self._parser.get_method(),
                self._target,
                self._known,
                self._others,
                repeated,
                body,
                keep_alive,
                self._http11,
            )
        )

    def _too_large(self) -> None:
        # Answered (413) without reading the body, which is why the connection then closes.
        self._add_request(None, False)
        self._body = []
        self.in_body = False
        self.stopped = True

    # -- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.stopped:
            return
        self.in_head = True
        self._new_message()
        self._reported = True

    def on_url(self, url: bytes) -> None:
        self._target = self._target + url if self._target else url
        self._unreported = 0
        self._reported = True
        self._head_bytes += len(url)
        if self._head_bytes > self._max_head:
            raise RequestRefused(431, "request head larger than the limit")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._unreported = 0
        self._reported = True
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > self._max_head:
            raise RequestRefused(431, "request head larger than the limit")
        lowered = name.lower()
        index = KNOWN_INDEX.get(lowered)
        if index is not None:
            first = self._known[index]
            if first is None:
                self._known[index] = value
                return
        else:
            others = self._others
            if others is None:
                others = self._others = {}
            count = len(others)
            # One lookup; an identity test would not do, as b"" and 1-byte values are shared objects.
            first = others.setdefault(lowered, value)
            if len(others) != count:
                return
        repeated = self._repeated
        if repeated is None:
            repeated = self._repeated = {}
        values = repeated.get(lowered)
        if values is None:
            repeated[lowered] = [first, value]
        else:
            values.append(value)

    def _join_repeated(self) -> None:
        """Give each repeated header its values joined with ", " (RFC 9110 §5.3)."""
        # Joined once the head (or the trailer) is read, not at each repetition: that would copy
        # the value so far every time, quadratic in the head (seconds of CPU for a large one).
        # Each list is left holding its one joined value, so that joining again after a
        # trailer copies nothing for names the trailer does not repeat.
        for name, values in self._repeated.items():  # type: ignore[union-attr]
            joined = b", ".join(values)
            index = KNOWN_INDEX.get(name)
            if index is None:
                self._others[name] = joined  # type: ignore[index]
            else:
                self._known[index] = joined
            values[:] = (joined,)

    def on_headers_complete(self) -> None:
        if self.stopped:
            return
        self.in_head = False
        if self._repeated:
            self._join_repeated()
        version = self._parser.get_http_version()
        if version == "1.1":
            self._http11 = True
        elif version == "1.0":
            self._http11 = False
        else:
            raise RequestRefused(505, "only HTTP/1.1 is served")
        known = self._known
        encoding = known[TRANSFER_ENCODING]
        if encoding is not None and encoding.strip().lower() != b"chunked":
            raise RequestRefused(501, "only the chunked transfer coding is supported")
        length = known[CONTENT_LENGTH]
        # llhttp accepted the value, so it is digits: only one of as many digits as the limit can
        # pass it (a length compared first, as int() of bytes is one of the dearer steps of reading a head).
        if length is not None and len(length) >= self._max_body_digits and int(length) > self._max_body:
            self._too_large()
            return
        self.in_body = True
        expect = known[EXPECT]
        self.expect_continue = expect is not None and expect.lower() == b"100-continue"

    def on_body(self, body: bytes) -> None:
        if self.stopped:
            return
        self._body_size += len(body)
        if self._body_size > self._max_body:
            # The parser may go on through this chunk, unheard.
            self._too_large()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self.stopped:
            return
        self.in_body = False
        self.expect_continue = False
        if self._repeated:
            self._join_repeated()  # again, for trailer fields repeating a name
        body = self._body
        self._add_request(body[0] if len(body) == 1 else b"".join(body), self._parser.should_keep_alive())
