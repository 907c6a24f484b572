"""HTTP as the core sees it: a parsed request, the port it answers through, and response bytes.

The net layer parses requests with httptools and implements `Exchange`; the agent
endpoint and the tests only ever see these types.
"""

from __future__ import annotations

from collections.abc import Sequence

from clientmcp_fast.core.memo import remember
from clientmcp_fast.speedups import KNOWN_INDEX, KNOWN_NAMES

Headers = Sequence[tuple[bytes, bytes]]

REASONS = {
    100: b"Continue",
    101: b"Switching Protocols",
    200: b"OK",
    201: b"Created",
    202: b"Accepted",
    204: b"No Content",
    302: b"Found",
    303: b"See Other",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    406: b"Not Acceptable",
    408: b"Request Timeout",
    413: b"Content Too Large",
    415: b"Unsupported Media Type",
    426: b"Upgrade Required",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    503: b"Service Unavailable",
    505: b"HTTP Version Not Supported",
}
STATUS_LINES = {status: b"HTTP/1.1 %d %s\r\n" % (status, reason) for status, reason in REASONS.items()}

TEXT_PLAIN = (b"content-type", b"text/plain; charset=utf-8")
APPLICATION_JSON = (b"content-type", b"application/json")
JSON_ONLY = (APPLICATION_JSON,)


# The header names a request keeps by position (`Request.header`) are defined beside the
# request reader, which imports nothing of the core (clientmcp_fast/_pure/http_reader.py).
# The positions the bridge reads by:
ACCEPT = KNOWN_INDEX[b"accept"]
AUTHORIZATION = KNOWN_INDEX[b"authorization"]
HOST = KNOWN_INDEX[b"host"]
MCP_METHOD = KNOWN_INDEX[b"mcp-method"]
MCP_NAME = KNOWN_INDEX[b"mcp-name"]
MCP_PROTOCOL_VERSION = KNOWN_INDEX[b"mcp-protocol-version"]
MCP_SESSION_ID = KNOWN_INDEX[b"mcp-session-id"]
ORIGIN = KNOWN_INDEX[b"origin"]
TRACEPARENT = KNOWN_INDEX[b"traceparent"]  # W3C Trace Context (docs/protocol.md, Trace context)
TRACESTATE = KNOWN_INDEX[b"tracestate"]


class Request:
    """One parsed HTTP request: header names lower-cased, repeated headers joined with ", ".

    The headers of `KNOWN_NAMES` are in `known`, by position (None when absent), the others
    in `others`; `header` reads the first, and `headers` is all of them as one dict.
    """

    # A cdef class when compiled (http.pxd), so that the typed modules read its fields
    # directly: every request is read by several of them.
    __slots__ = (
        "method",
        "target",
        "known",
        "others",
        "repeated",
        "body",
        "keep_alive",
        "http11",
        "_headers",
    )

    def __init__(
        self,
        method: bytes,
        target: bytes,
        known: list[bytes | None],
        others: dict[bytes, bytes] | None,
        repeated: frozenset[bytes] | tuple[()],
        body: bytes | None,
        keep_alive: bool,
        http11: bool = True,
    ) -> None:
        self.method = method
        self.target = target
        self.known = known  # by KNOWN_NAMES position
        self.others = others  # the headers of other names; None when there are none
        self.repeated = repeated  # names that appeared more than once
        self.body = body  # None: the body was larger than 4 MiB and was not read
        self.keep_alive = keep_alive
        self.http11 = http11  # False for HTTP/1.0, which has no chunked coding
        self._headers: dict[bytes, bytes] | None = None

    def header(self, index: int) -> bytes | None:
        """The value of the header `KNOWN_NAMES[index]`, or None."""
        return self.known[index]

    @property
    def headers(self) -> dict[bytes, bytes]:
        """Every header, by lower-cased name (made on first use: the hot path reads `header`)."""
        headers = self._headers
        if headers is None:
            headers = {name: value for name, value in zip(KNOWN_NAMES, self.known) if value is not None}
            if self.others:
                headers.update(self.others)
            self._headers = headers
        return headers

    def __repr__(self) -> str:
        return f"Request({self.method!r}, {self.target!r}, {len(self.headers)} headers)"


class Exchange:
    """One request being answered: the port through which the core answers it.

    The net layer's `HttpExchange` answers on a connection; a batch element collects its
    answer; core tests record. A base class rather than a Protocol, so that compiled, the
    core calls these methods directly. Each subclass sets `request` (a `Request`) and
    `on_abandon`, which the core sets while an answer is pending: called with `now` if the peer goes
    away first.
    """

    __slots__ = ("request", "on_abandon")

    def respond(self, status: int, headers: Headers, body: bytes) -> None:
        """Answer in full; Content-Length and connection handling are added."""
        raise NotImplementedError

    def start_stream(self, headers: Headers) -> None:
        """Answer 200 with a body that follows in pieces (an SSE stream)."""
        raise NotImplementedError

    def stream(self, data: bytes) -> None:
        """Send a piece of a started stream."""
        raise NotImplementedError

    def end_stream(self) -> None:
        """End a started stream; the connection carries on with the next request."""
        raise NotImplementedError

    def backlog(self) -> int:
        """Bytes written for the peer that it has not taken yet (0 where nothing is kept)."""
        return 0


_HEAD_PREFIXES: dict[tuple, bytes] = {}
_MAX_HEAD_PREFIXES = 1024  # CORS origins vary by agent: bound what is remembered


def _head_prefix(status: int, headers: Headers, close: bool) -> bytes:
    """Status line and headers of a response, without the headers that frame its body."""
    # The same few header sets answer nearly every request: each is built once.
    key = (status, headers, close) if type(headers) is tuple else None
    known = _HEAD_PREFIXES
    prefix = known.get(key) if key is not None else None
    if prefix is None:
        parts = [STATUS_LINES.get(status) or b"HTTP/1.1 %d Unknown\r\n" % status]
        for name, value in headers:
            parts += (name, b": ", value, b"\r\n")
        if close:
            parts.append(b"connection: close\r\n")
        prefix = b"".join(parts)
        if key is not None:
            remember(known, key, prefix, _MAX_HEAD_PREFIXES)
    return prefix


# Nearly every answer is a JSON 200: its heads are at hand, no key made and looked up.
_JSON_OK = _head_prefix(200, JSON_ONLY, False)
_JSON_OK_CLOSE = _head_prefix(200, JSON_ONLY, True)


# The Content-Length lines of the usual body sizes, each made the first time it is needed:
# formatting the number cost more than the rest of a small answer's head.
_LENGTH_LINES: list = [None] * 4096


def _length_line(length: int) -> bytes:
    """The Content-Length line that ends a head."""
    if length < 4096:
        line = _LENGTH_LINES[length]
        if line is None:
            # An f-string, not %-formatting: compiled, it formats the C length directly.
            line = _LENGTH_LINES[length] = f"content-length: {length}\r\n\r\n".encode()
        return line
    return f"content-length: {length}\r\n\r\n".encode()


def response_message(
    status: int, headers: Headers, body: bytes, close: bool, with_body: bool = True
) -> bytes:
    """A whole response with its Content-Length; `with_body=False` leaves the body out (a HEAD answer)."""
    if status == 200 and headers is JSON_ONLY:
        prefix = _JSON_OK_CLOSE if close else _JSON_OK
    else:
        prefix = _head_prefix(status, headers, close)
    length = _length_line(len(body))
    return b"".join((prefix, length, body)) if with_body else prefix + length


def response_head(status: int, headers: Headers, close: bool, chunked: bool = True) -> bytes:
    """The head of a response whose body follows in chunks, or (`chunked=False`, HTTP/1.0) until the end."""
    prefix = _head_prefix(status, headers, close)
    return prefix + b"transfer-encoding: chunked\r\n\r\n" if chunked else prefix + b"\r\n"


def plain_response(status: int, text: str, extra: Headers = (), close: bool = False) -> bytes:
    """A whole text/plain response: the answer to anything that is not MCP."""
    body = text.encode("utf-8") + b"\n"
    return response_message(status, (TEXT_PLAIN, *extra), body, close)


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (RFC 9112 §7.1)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"
