# cython: language_level=3
"""HTTP/1.1 request reading on httptools; the compiled twin of `clientmcp_fast/_pure/http_reader.py`.

Same contract, tested for identical results: httptools calls back once per header, and
here each callback runs in C rather than in the interpreter, which is most of the
per-request cost of reading a request.
"""

import httptools

from clientmcp_fast._pure.errors import RequestRefused
from clientmcp_fast._pure.routing import ROUTE_CONNECT, ROUTE_ECHO
from clientmcp_fast.core.http import Request
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES

from clientmcp_fast._speedups.routing import route

cdef object HttpParserUpgrade = httptools.HttpParserUpgrade
cdef object HttpParserError = httptools.HttpParserError
cdef Py_ssize_t MAX_BODY = MAX_MESSAGE_BYTES


cdef class RequestReader:
    """Parses one connection's requests into its queue; stops at an upgrade or a refusal."""

    def __init__(self, object queue, Py_ssize_t max_head_bytes, bint websocket_echo):
        self._parser = httptools.HttpRequestParser(self)
        self._queue = queue
        self._max_head = max_head_bytes
        self._echo = websocket_echo
        self._new_message()
        self._reported = False
        self._http11 = True
        self.in_head = False
        self.in_body = False
        self.expect_continue = False
        self.stopped = False
        self.upgrade = None
        self.refusal = None

    cpdef feed(self, object data):
        """Parse `data`; complete requests are appended to the queue."""
        if self.stopped:
            return
        self._reported = False
        try:
            while True:
                try:
                    self._parser.feed_data(data)
                    break
                except HttpParserUpgrade as upgrade:
                    data = data[upgrade.args[0]:]
                    if self._hand_off(data) or not data:
                        break
        except HttpParserError as error:
            context = error.__context__
            if isinstance(context, RequestRefused):
                self._refuse(context.status, context.text)
            else:
                self._refuse(400, "malformed HTTP request")
            return
        if self.in_head and not self._reported:
            # httptools holds an unfinished header line without a callback: the chunks fed since
            # the last callback are all part of it (see the twin).
            self._unreported += len(data)
            if self._head_bytes + self._unreported > self._max_head:
                self._refuse(431, "request head larger than the limit")

    cdef bint _hand_off(self, bytes tail) except -1:
        queue = self._queue
        request = queue[-1] if queue else None
        if request is None or request.method != b"GET":
            return False
        kind, _ = route(request.target)
        if kind != ROUTE_CONNECT and not (kind == ROUTE_ECHO and self._echo):
            return False
        self.upgrade = (request, tail)
        self.stopped = True
        return True

    cdef _refuse(self, int status, str text):
        self.refusal = (status, text)
        self.in_head = False
        self.in_body = False
        self.stopped = True

    cdef _new_message(self):
        self._target = b""
        self._headers = {}
        self._repeated = None
        self._body = []
        self._body_size = 0
        self._head_bytes = 0
        self._unreported = 0

    cdef _too_large(self):
        self._queue.append(
            Request(self._parser.get_method(), self._target, self._headers, self._repeated or (), None, False, self._http11)
        )
        self._body = []
        self.in_body = False
        self.stopped = True

    # -- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self):
        if self.stopped:
            return
        self.in_head = True
        self._new_message()
        self._reported = True

    def on_url(self, bytes url):
        self._target = self._target + url if self._target else url
        self._unreported = 0
        self._reported = True
        self._head_bytes += len(url)
        if self._head_bytes > self._max_head:
            raise RequestRefused(431, "request head larger than the limit")

    def on_header(self, bytes name, bytes value):
        self._unreported = 0
        self._reported = True
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > self._max_head:
            raise RequestRefused(431, "request head larger than the limit")
        lowered = name.lower()
        headers = self._headers
        count = len(headers)
        # One lookup; an identity test would not do, as b"" and 1-byte values are shared objects.
        first = headers.setdefault(lowered, value)
        if len(headers) == count:
            if self._repeated is None:
                self._repeated = set()
            self._repeated.add(lowered)
            headers[lowered] = first + b", " + value

    def on_headers_complete(self):
        if self.stopped:
            return
        self.in_head = False
        version = self._parser.get_http_version()
        if version == "1.1":
            self._http11 = True
        elif version == "1.0":
            self._http11 = False
        else:
            raise RequestRefused(505, "only HTTP/1.1 is served")
        headers = self._headers
        encoding = headers.get(b"transfer-encoding")
        if encoding is not None and encoding.strip().lower() != b"chunked":
            raise RequestRefused(501, "only the chunked transfer coding is supported")
        length = headers.get(b"content-length")
        # llhttp accepted the value, so it is digits: only a 7-digit one can pass 4 MiB (a length
        # compared first, as int() of bytes is one of the dearer steps of reading a head).
        if length is not None and len(length) >= 7 and int(length) > MAX_BODY:
            self._too_large()
            return
        self.in_body = True
        expect = headers.get(b"expect")
        self.expect_continue = expect is not None and expect.lower() == b"100-continue"

    def on_body(self, bytes body):
        if self.stopped:
            return
        self._body_size += len(body)
        if self._body_size > MAX_BODY:
            self._too_large()
            return
        self._body.append(body)

    def on_message_complete(self):
        if self.stopped:
            return
        self.in_body = False
        self.expect_continue = False
        body = self._body
        parser = self._parser
        self._queue.append(
            Request(
                parser.get_method(),
                self._target,
                self._headers,
                self._repeated or (),
                body[0] if len(body) == 1 else b"".join(body),
                parser.should_keep_alive(),
                self._http11,
            )
        )
