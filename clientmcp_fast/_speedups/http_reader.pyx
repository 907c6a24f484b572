# cython: language_level=3
"""HTTP/1.1 request reading on llhttp, driven from C; the compiled twin of `clientmcp_fast/_pure/http_reader.py`.

httptools' Python API hands each URL piece, header and body piece to a Python callback,
making two bytes objects per header on the way: that was most of the cost of reading a
request. Here the same parser, llhttp, compiled into this module from vendor/llhttp (the
release httptools 0.9.0 carries), calls C functions of this module instead. A header of
a name the bridge knows goes to that name's position in the request's list, with no name
object made and nothing hashed, and the version is read as two numbers rather than a
formatted string.

The contract is the twin's, tested for identical results on the same bytes however
they are cut: the moments the head limit is checked follow httptools' own (a header
counts once it is complete), so both refuse at the same byte.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_SetDefault, PyDict_Size
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy, memset

from clientmcp_fast._pure import http_reader as twin
from clientmcp_fast._pure.http_reader import EXPECT, KNOWN_INDEX, KNOWN_NAMES, TRANSFER_ENCODING
from clientmcp_fast._pure.routing import ROUTE_CONNECT

from clientmcp_fast._speedups.routing import route

# The bits `feed` returns, as the twin defines them.
cdef int READING_HEAD = twin.READING_HEAD
cdef int READING_BODY = twin.READING_BODY
cdef int EXPECTS_CONTINUE = twin.EXPECTS_CONTINUE
cdef int STOPPED = twin.STOPPED
cdef int REFUSED = twin.REFUSED
cdef str HEAD_TOO_LARGE = "request head larger than the limit"

# The llhttp compiled in (vendor/llhttp/README.md).
LLHTTP_VERSION = (LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH)

# One settings table serves every reader: a callback finds its reader through `data`.
cdef llhttp_settings_t SETTINGS
llhttp_settings_init(&SETTINGS)

# -- header names ------------------------------------------------------------------------------

# `KNOWN_NAMES` (the twin's) as C data, so that finding a name walks plain arrays (the
# tuple keeps the bytes alive).
cdef Py_ssize_t KNOWN_COUNT = len(KNOWN_NAMES)
cdef Py_ssize_t KNOWN_SIZES[32]
cdef const char* KNOWN_DATA[32]
assert KNOWN_COUNT <= 32 and max(len(name) for name in KNOWN_NAMES) <= 64
for _index, _name in enumerate(KNOWN_NAMES):
    KNOWN_SIZES[_index] = len(_name)
    KNOWN_DATA[_index] = PyBytes_AS_STRING(_name)
cdef Py_ssize_t KNOWN_TRANSFER_ENCODING = TRANSFER_ENCODING
cdef Py_ssize_t KNOWN_EXPECT = EXPECT
# Method names by llhttp's number, made once each (llhttp has fewer than 64 methods).
cdef list METHOD_NAMES = [None] * 64


cdef Py_ssize_t _known_index(const char* name, Py_ssize_t size) noexcept:
    """The position of the header name in KNOWN_NAMES, whatever its case; -1 if it is not there."""
    cdef char lowered[64]
    cdef Py_ssize_t i
    cdef char c
    if size > 64:
        return -1
    for i in range(size):
        c = name[i]
        lowered[i] = c + 32 if 65 <= c <= 90 else c  # A-Z only, as bytes.lower()
    for i in range(KNOWN_COUNT):
        if KNOWN_SIZES[i] == size and memcmp(KNOWN_DATA[i], lowered, size) == 0:
            return i
    return -1


cdef int _span_add(Span* span, const char* at, size_t length) except -1:
    cdef Py_ssize_t needed = span.size + <Py_ssize_t>length
    cdef char* grown
    if needed > span.capacity:
        grown = <char*>PyMem_Realloc(span.data, needed if needed > 64 else 64)
        if grown == NULL:
            raise MemoryError()
        span.data = grown
        span.capacity = needed if needed > 64 else 64
    memcpy(span.data + span.size, at, length)
    span.size = needed
    span.present = True
    return 0


cdef inline void _span_clear(Span* span) noexcept:
    span.size = 0
    span.present = False


cdef inline void _span_shrink(Span* span) noexcept:
    # A connection keeps its buffers between requests, sized by its longest header so far:
    # one large header must not cost every idle keep-alive connection that much for good.
    if span.capacity > 1024:
        PyMem_Free(span.data)
        span.data = NULL
        span.capacity = 0


# -- the callbacks llhttp makes: each hands over to its reader --------------------------------
#
# An exception cannot cross llhttp's C frames: a callback keeps it on its reader and returns
# -1, which ends llhttp_execute, and `_parse` raises it again there, as httptools does. Only a
# refusal the reader asked for (`_pending`), or bytes llhttp rejects, become an HTTP refusal.


cdef int on_message_begin(llhttp_t* parser) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._message_begin() else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_url(llhttp_t* parser, const char* at, size_t length) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._url(at, length) else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_header_field(llhttp_t* parser, const char* at, size_t length) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._header_field(at, length) else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_header_value(llhttp_t* parser, const char* at, size_t length) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._header_value(at, length) else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_headers_complete(llhttp_t* parser) noexcept:
    try:
        if (<RequestReader>parser.data)._headers_complete():
            return -1
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1
    # As httptools does: an upgrade request has no body, and parsing pauses after it.
    return 1 if parser.upgrade else 0


cdef int on_body(llhttp_t* parser, const char* at, size_t length) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._body_piece(at, length) else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_message_complete(llhttp_t* parser) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._message_complete() else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_chunk_header(llhttp_t* parser) noexcept:
    try:
        return -1 if (<RequestReader>parser.data)._chunk_header() else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


cdef int on_chunk_complete(llhttp_t* parser) noexcept:
    try:
        # Trailer fields are headers too, as httptools reports them.
        return -1 if (<RequestReader>parser.data)._report_header() else 0
    except BaseException as failure:
        (<RequestReader>parser.data)._failure = failure
        return -1


SETTINGS.on_message_begin = on_message_begin
SETTINGS.on_url = on_url
SETTINGS.on_header_field = on_header_field
SETTINGS.on_header_value = on_header_value
SETTINGS.on_headers_complete = on_headers_complete
SETTINGS.on_body = on_body
SETTINGS.on_message_complete = on_message_complete
SETTINGS.on_chunk_header = on_chunk_header
SETTINGS.on_chunk_complete = on_chunk_complete


cdef class RequestReader:
    """Parses one connection's requests into its queue; stops at an upgrade or a refusal."""

    def __cinit__(self):
        memset(&self._name, 0, sizeof(Span))
        memset(&self._value, 0, sizeof(Span))

    def __init__(self, object queue, object make_request, Py_ssize_t max_head_bytes, Py_ssize_t max_body_bytes):
        """Read into `queue` what `make_request` makes of each request (the core's `Request`), within the limits."""
        llhttp_init(&self._llhttp, HTTP_REQUEST, &SETTINGS)
        self._llhttp.data = <void*>self
        self._queue = queue
        self._enqueue = queue.append  # looked up once, not per request
        self._make_request = make_request
        self._max_head = max_head_bytes
        self._max_body = max_body_bytes
        self._last_values = [None] * KNOWN_COUNT
        self._new_message()
        self._reported = False
        self._http11 = True
        self._pending = None
        self._failure = None
        self.in_head = False
        self.in_body = False
        self.expect_continue = False
        self.stopped = False
        self.upgrade = None
        self.refusal = None

    def __dealloc__(self):
        PyMem_Free(self._name.data)
        PyMem_Free(self._value.data)

    cpdef int feed(self, bytes data) except -1:
        """Parse `data`; complete requests are appended to the queue. The state after it, as bits."""
        cdef int state
        if not self.stopped:
            self._parse(data)
        # A head and its body are read one after the other, never both at once.
        state = READING_HEAD if self.in_head else READING_BODY if self.in_body else 0
        if self.expect_continue:
            state |= EXPECTS_CONTINUE
        if self.stopped:
            state |= STOPPED | REFUSED if self.refusal is not None else STOPPED
        return state

    cdef _parse(self, bytes data):
        cdef int error
        cdef Py_ssize_t offset
        self._reported = False
        while True:
            error = llhttp_execute(&self._llhttp, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
            if error == HPE_OK:
                break
            if error == HPE_PAUSED_UPGRADE and self._llhttp.upgrade == 1:
                offset = llhttp_get_error_pos(&self._llhttp) - PyBytes_AS_STRING(data)
                llhttp_resume_after_upgrade(&self._llhttp)
                data = data[offset:]
                if self._hand_off(data) or not data:
                    break
                continue
            failure = self._failure
            if failure is not None:  # a bug or a MemoryError, not the peer's bytes: not a 400
                self._failure = None
                raise failure
            pending = self._pending
            if pending is not None:
                self._refuse(pending[0], pending[1])
            else:
                self._refuse(400, "malformed HTTP request")
            return
        if self.in_head and not self._reported:
            # llhttp holds an unfinished header line without a callback here (see the twin):
            # the chunks fed since the last reported piece are all part of it.
            self._unreported += len(data)
            if self._head_bytes + self._unreported > self._max_head:
                self._refuse(431, HEAD_TOO_LARGE)

    cdef bint _hand_off(self, bytes tail) except -1:
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

    cdef _refuse(self, int status, str text):
        self.refusal = (status, text)
        self.in_head = False
        self.in_body = False
        self.stopped = True

    cdef _new_message(self):
        self._target = b""
        self._known = [None] * KNOWN_COUNT
        self._others = None
        self._repeated = None
        self._body = None
        self._body_size = 0
        self._head_bytes = 0
        self._unreported = 0

    cdef bytes _method(self):
        cdef int number = self._llhttp.method
        name = METHOD_NAMES[number]
        if name is None:
            name = METHOD_NAMES[number] = <bytes>llhttp_method_name(number)
        return name

    cdef _add_request(self, object body, bint keep_alive):
        repeated = frozenset(self._repeated) if self._repeated else ()
        self._enqueue(
            self._make_request(
                self._method(), self._target, self._known, self._others, repeated, body, keep_alive, self._http11
            )
        )

    cdef _too_large(self):
        self._add_request(None, False)
        self._body = None
        self.in_body = False
        self.stopped = True

    # -- what the callbacks do: 0 to carry on, 1 to stop (a refusal is pending, or the bytes are bad)

    cdef int _message_begin(self) except -1:
        if self.stopped:
            return 0
        self.in_head = True
        self._new_message()
        self._reported = True
        return 0

    cdef int _url(self, const char* at, size_t length) except -1:
        url = PyBytes_FromStringAndSize(at, length)
        self._target = self._target + url if self._target else url
        self._unreported = 0
        self._reported = True
        self._head_bytes += length
        if self._head_bytes > self._max_head:
            self._pending = (431, HEAD_TOO_LARGE)
            return 1
        return 0

    cdef int _header_field(self, const char* at, size_t length) except -1:
        if self._value.present and self._report_header():
            return 1
        return _span_add(&self._name, at, length)

    cdef int _header_value(self, const char* at, size_t length) except -1:
        return _span_add(&self._value, at, length)

    cdef int _report_header(self) except -1:
        """A header is complete (httptools' moment to call `on_header`): count it, keep it."""
        if not self._value.present:
            return 0
        cdef Py_ssize_t name_size = self._name.size
        cdef Py_ssize_t index = _known_index(self._name.data, name_size)
        cdef Py_ssize_t count
        cdef list known
        value = self._value_bytes(index)
        # A bytes object for the name only when it is not a known one.
        name = PyBytes_FromStringAndSize(self._name.data, name_size).lower() if index < 0 else None
        _span_clear(&self._name)
        _span_clear(&self._value)
        self._unreported = 0
        self._reported = True
        self._head_bytes += name_size + PyBytes_GET_SIZE(value) + 4
        if self._head_bytes > self._max_head:
            self._pending = (431, HEAD_TOO_LARGE)
            return 1
        if index >= 0:
            known = self._known
            first = known[index]
            if first is None:
                known[index] = value
                return 0
            name = KNOWN_NAMES[index]
        else:
            others = self._others
            if others is None:
                others = self._others = {}
            count = PyDict_Size(others)
            # One lookup; an identity test would not do, as b"" and 1-byte values are shared objects.
            first = <object>PyDict_SetDefault(others, name, value)
            if PyDict_Size(others) != count:
                return 0
        repeated = self._repeated
        if repeated is None:
            repeated = self._repeated = {}
        values = repeated.get(name)
        if values is None:
            repeated[name] = [first, value]
        else:
            values.append(value)
        return 0

    cdef bytes _value_bytes(self, Py_ssize_t index):
        """The value just read, as bytes: for a known name, the last one read when the bytes are the same."""
        # A keep-alive agent sends the same values request after request, its token above
        # all: one object serves them all, and its hash, once computed, serves every lookup.
        cdef Py_ssize_t size = self._value.size
        cdef bytes value
        if index >= 0:
            value = self._last_values[index]
            if value is not None and PyBytes_GET_SIZE(value) == size and memcmp(
                PyBytes_AS_STRING(value), self._value.data, size
            ) == 0:
                return value
        value = PyBytes_FromStringAndSize(self._value.data, size)
        if index >= 0:
            self._last_values[index] = value
        return value

    cdef _join_repeated(self):
        # Once the head (or trailer) is read, not at each repetition (see the twin).
        for name, values in self._repeated.items():
            joined = b", ".join(values)
            index = KNOWN_INDEX.get(name)
            if index is None:
                self._others[name] = joined
            else:
                self._known[index] = joined
            values[:] = (joined,)

    cdef int _headers_complete(self) except -1:
        if self._report_header():
            return 1
        _span_shrink(&self._name)
        _span_shrink(&self._value)
        if self.stopped:
            return 0
        self.in_head = False
        if self._repeated:
            self._join_repeated()
        if self._llhttp.http_major == 1 and self._llhttp.http_minor == 1:
            self._http11 = True
        elif self._llhttp.http_major == 1 and self._llhttp.http_minor == 0:
            self._http11 = False
        else:
            self._pending = (505, "only HTTP/1.1 is served")
            return 1
        known = self._known
        encoding = known[KNOWN_TRANSFER_ENCODING]
        if encoding is not None:
            if encoding.strip().lower() != b"chunked":
                self._pending = (501, "only the chunked transfer coding is supported")
                return 1
        # llhttp has read Content-Length as a number (0 without one; with two, it refused).
        if self._llhttp.content_length > <uint64_t>self._max_body:
            self._too_large()
            return 0
        self.in_body = True
        expect = known[KNOWN_EXPECT]
        self.expect_continue = expect is not None and expect.lower() == b"100-continue"
        return 0

    cdef int _body_piece(self, const char* at, size_t length) except -1:
        if self.stopped:
            return 0
        self._body_size += length
        if self._body_size > self._max_body:
            self._too_large()
            return 0
        piece = PyBytes_FromStringAndSize(at, length)
        body = self._body
        # A body mostly comes in one piece: a list is made only for a second one.
        if body is None:
            self._body = piece
        elif type(body) is list:
            (<list>body).append(piece)
        else:
            self._body = [body, piece]
        return 0

    cdef int _message_complete(self) except -1:
        if self.stopped:
            return 0
        self.in_body = False
        self.expect_continue = False
        if self._repeated:
            self._join_repeated()  # again, for trailer fields repeating a name
        body = self._body
        keep_alive = llhttp_should_keep_alive(&self._llhttp) != 0
        self._add_request(b"" if body is None else b"".join(body) if type(body) is list else body, keep_alive)
        return 0

    cdef int _chunk_header(self) except -1:
        # httptools refuses a header left half-read when a chunk begins; so does this.
        if self._name.present or self._value.present:
            return 1
        return 0

