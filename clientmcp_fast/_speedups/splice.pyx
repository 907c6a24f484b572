# cython: language_level=3
"""JSON bytes passed through, spliced into messages; the compiled twin of `clientmcp_fast/_pure/splice.py`.

One allocation and a copy per piece, where `b"".join` of a buffer that is not bytes asks
every piece for its buffer. A result's shape is found by walking its top-level members,
where the twin decodes it a second time, and a batch's elements are counted by walking
them, where the twin decodes them.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy

import msgspec

from clientmcp_fast._pure import splice as twin

# The twin's fixed pieces (one definition serves both), held as typed C globals.
cdef bytes _RESULT_HEAD = twin.RESULT_HEAD
cdef bytes _RESULT_MIDDLE = twin.RESULT_MIDDLE
cdef bytes _COMPLETE_OPEN = twin.COMPLETE_OPEN
cdef bytes _CALL_HEAD = twin.CALL_HEAD
cdef bytes _CALL_NAME = twin.CALL_NAME
cdef bytes _CALL_ARGUMENTS = twin.CALL_ARGUMENTS
cdef bytes _TRACEPARENT_MEMBER = twin.TRACEPARENT_MEMBER
cdef bytes _TRACESTATE_MEMBER = twin.TRACESTATE_MEMBER
cdef bytes _QUOTE_BRACE = b'"}'
cdef bytes _BRACE = b"}"
cdef object _NOT_TEXT = twin.NOT_TEXT
cdef object _UNSET = msgspec.UNSET
cdef int SHAPE_BAD = twin.SHAPE_BAD
cdef int SHAPE_CONTENT = twin.SHAPE_CONTENT
cdef int SHAPE_TYPED = twin.SHAPE_TYPED
cdef int SHAPE_ERROR = twin.SHAPE_ERROR


def first_byte(object json):
    """The first byte of some JSON (it tells the value's type), or -1 if there is none."""
    cdef Py_buffer view
    cdef int first
    PyObject_GetBuffer(json, &view, PyBUF_SIMPLE)
    first = (<unsigned char*>view.buf)[0] if view.len else -1
    PyBuffer_Release(&view)
    return first


def json_id(object raw):
    """A JSON-RPC id as bytes when it is a string or a number, as MCP requires; else None."""
    cdef Py_buffer view
    cdef unsigned char first
    PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE)
    try:
        if not view.len:
            return None
        first = (<unsigned char*>view.buf)[0]
        if first == 0x22 or 0x30 <= first <= 0x39 or first == 0x2D:
            return PyBytes_FromStringAndSize(<char*>view.buf, view.len)
        return None
    finally:
        PyBuffer_Release(&view)


def json_member(object raw):
    """A member kept as Raw, as the checks read it: its text if a string, None if null, else NOT_TEXT.

    `msgspec.UNSET` (the member is absent) is given back as it is. The JSON is a value
    msgspec has read from valid UTF-8; a string without escapes is decoded here, one with
    escapes by the twin.
    """
    if raw is _UNSET:
        return raw
    cdef Py_buffer view
    cdef const char* p
    PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE)
    try:
        p = <const char*>view.buf
        if view.len >= 2 and p[0] == 0x22:  # '"'
            if memchr(p + 1, 0x5C, view.len - 2) == NULL:  # no backslash: the bytes are the text
                return PyUnicode_DecodeUTF8(p + 1, view.len - 2, NULL)
            return twin.json_member(raw)
        return None if view.len and p[0] == 0x6E else _NOT_TEXT  # "n": null
    finally:
        PyBuffer_Release(&view)


cdef bytes _spliced(bytes a, bytes b, bytes c, bytes d, bytes e, object json, int opening=-1):
    """Five bytes pieces (b"" for none), then the JSON that `json` holds (any buffer), then "}".

    With an `opening` byte, the JSON must start with it, and it is left out.
    """
    # Pieces as C arguments, not a tuple: this runs twice per call.
    cdef Py_buffer view
    cdef char* at
    cdef Py_ssize_t skip = 0
    PyObject_GetBuffer(json, &view, PyBUF_SIMPLE)
    try:
        if opening >= 0:
            if view.len == 0 or (<unsigned char*>view.buf)[0] != opening:
                raise ValueError(f"the JSON does not start with {chr(opening)!r}")
            skip = 1
        message = PyBytes_FromStringAndSize(
            NULL,
            PyBytes_GET_SIZE(a) + PyBytes_GET_SIZE(b) + PyBytes_GET_SIZE(c) + PyBytes_GET_SIZE(d)
            + PyBytes_GET_SIZE(e) + view.len - skip + 1,
        )
        at = _put(_put(_put(_put(_put(PyBytes_AS_STRING(message), a), b), c), d), e)
        memcpy(at, <char*>view.buf + skip, view.len - skip)
        at[view.len - skip] = 0x7D  # "}"
        return message
    finally:
        PyBuffer_Release(&view)


def jsonrpc_result(bytes id_json not None, object result):
    """A JSON-RPC response around a result that is JSON already."""
    return _spliced(_RESULT_HEAD, id_json, _RESULT_MIDDLE, b"", b"", result)


def complete_result(bytes id_json not None, object result):
    """A 2026-07-28 JSON-RPC response around `result`, `"resultType":"complete"` put first in it.

    For an object result that has members and no resultType (what `result_shape` calls
    SHAPE_CONTENT); a value that does not start with "{" raises ValueError.
    """
    return _spliced(_RESULT_HEAD, id_json, _RESULT_MIDDLE, _COMPLETE_OPEN, b"", result, 0x7B)  # "{"


def call_message(bytes call_id not None, bytes name not None, object arguments):
    """A `call` for the app; `call_id` and `name` (a registered tool name) never need escaping."""
    return _spliced(_CALL_HEAD, call_id, _CALL_NAME, name, _CALL_ARGUMENTS, arguments)


def traced_call_message(
    bytes call_id not None, bytes name not None, object arguments, bytes traceparent not None, bytes tracestate not None
):
    """A `call` with the trace context members (docs/protocol.md, Trace context).

    `traceparent` is a checked one (hex and dashes: nothing to escape); `tracestate` a JSON
    string, or b"" for none.
    """
    cdef Py_buffer view
    cdef char* at
    cdef bytes before_close = _TRACESTATE_MEMBER if PyBytes_GET_SIZE(tracestate) else b""
    cdef bytes close = _BRACE if PyBytes_GET_SIZE(tracestate) else _QUOTE_BRACE
    PyObject_GetBuffer(arguments, &view, PyBUF_SIMPLE)
    try:
        message = PyBytes_FromStringAndSize(
            NULL,
            PyBytes_GET_SIZE(_CALL_HEAD) + PyBytes_GET_SIZE(call_id) + PyBytes_GET_SIZE(_CALL_NAME)
            + PyBytes_GET_SIZE(name) + PyBytes_GET_SIZE(_CALL_ARGUMENTS) + view.len
            + PyBytes_GET_SIZE(_TRACEPARENT_MEMBER) + PyBytes_GET_SIZE(traceparent)
            + PyBytes_GET_SIZE(before_close) + PyBytes_GET_SIZE(tracestate) + PyBytes_GET_SIZE(close),
        )
        at = _put(_put(_put(_put(_put(PyBytes_AS_STRING(message), _CALL_HEAD), call_id), _CALL_NAME), name), _CALL_ARGUMENTS)
        memcpy(at, <char*>view.buf, view.len)
        _put(_put(_put(_put(_put(at + view.len, _TRACEPARENT_MEMBER), traceparent), before_close), tracestate), close)
        return message
    finally:
        PyBuffer_Release(&view)


# -- a result's shape ------------------------------------------------------------------------------
# The input is JSON that msgspec has read already (a message's `result`), so it is valid:
# walking it needs to tell strings and nesting apart, never to check them. What this walk
# does not handle (a member name with an escape) goes to the twin.

cdef inline Py_ssize_t _blank_end(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept:
    """Where the whitespace from `i` ends."""
    while i < n and (p[i] == 0x20 or p[i] == 0x0A or p[i] == 0x0D or p[i] == 0x09):
        i += 1
    return i


cdef Py_ssize_t _string_end(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept:
    """Just past the string whose opening quote is at `i`, or -1."""
    cdef const unsigned char* quote
    cdef Py_ssize_t at, backslashes
    i += 1
    while i < n:
        quote = <const unsigned char*>memchr(p + i, 0x22, n - i)
        if quote == NULL:
            return -1
        at = quote - p
        backslashes = 0
        while at - backslashes - 1 >= i and p[at - backslashes - 1] == 0x5C:
            backslashes += 1
        if backslashes % 2 == 0:  # an escaped backslash does not escape the quote
            return at + 1
        i = at + 1
    return -1


cdef Py_ssize_t _value_end(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept:
    """Just past the value that starts at `i`, or -1."""
    cdef Py_ssize_t depth = 0
    cdef unsigned char c
    while i < n:
        c = p[i]
        if c == 0x22:  # a string
            i = _string_end(p, i, n)
            if i < 0 or depth == 0:
                return i
            continue
        if c == 0x7B or c == 0x5B:  # { [
            depth += 1
        elif c == 0x7D or c == 0x5D:  # } ]
            if depth == 0:
                return i  # the end of the object around a number or literal
            depth -= 1
            if depth == 0:
                return i + 1
        elif depth == 0 and (c == 0x2C or c == 0x20 or c == 0x0A or c == 0x0D or c == 0x09):
            return i
        i += 1
    return i if depth == 0 else -1


cdef int _walk_shape(const unsigned char* p, Py_ssize_t n) noexcept:
    """The shape of the object in `p`, or -1 to leave it to the twin."""
    cdef Py_ssize_t i = _blank_end(p, 0, n)
    cdef Py_ssize_t end, size
    cdef int content = -1
    cdef bint typed = False
    cdef bint error = False
    if i >= n or p[i] != 0x7B:  # not an object
        return SHAPE_BAD
    i = _blank_end(p, i + 1, n)
    if i < n and p[i] == 0x7D:
        return SHAPE_BAD  # no content
    while i < n:
        if p[i] != 0x22:
            return -1
        end = _string_end(p, i, n)
        if end < 0:
            return -1
        size = end - i - 2
        if memchr(p + i + 1, 0x5C, size) != NULL:
            return -1  # an escaped name: the twin decodes it
        i = _blank_end(p, end, n)
        if i >= n or p[i] != 0x3A:  # :
            return -1
        i = _blank_end(p, i + 1, n)
        if i >= n:
            return -1
        if size == 7 and memcmp(p + end - 8, b"content", 7) == 0:
            content = p[i]  # the last one counts, as in msgspec
        elif size == 7 and memcmp(p + end - 8, b"isError", 7) == 0:
            error = p[i] == 0x74  # "t": of valid JSON, only true starts so
        elif size == 10 and memcmp(p + end - 11, b"resultType", 10) == 0:
            typed = True
        i = _value_end(p, i, n)
        if i < 0:
            return -1
        i = _blank_end(p, i, n)
        if i >= n:
            return -1
        if p[i] == 0x7D:  # }
            if content != 0x5B:  # [
                return SHAPE_BAD
            return (SHAPE_TYPED if typed else SHAPE_CONTENT) + (SHAPE_ERROR if error else 0)
        if p[i] != 0x2C:  # ,
            return -1
        i = _blank_end(p, i + 1, n)
    return -1


# -- a batch's length ------------------------------------------------------------------------------
# Here the input has not been read yet: a walk of bytes that are not JSON counts what it
# counts, stays within them, and the caller finds out they are not JSON when it decodes them.

def array_length(bytes text not None, Py_ssize_t limit):
    """How many elements the JSON array `text` has, counted no further than limit + 1; -1 if it is not an array.

    For a batch's elements to be counted before any is made: the walk stops after limit + 1.
    """
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(text)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text)
    cdef Py_ssize_t i = _blank_end(p, 0, n)
    cdef Py_ssize_t count = 0
    if i >= n or p[i] != 0x5B:  # not "["
        return -1
    i = _blank_end(p, i + 1, n)
    if i < n and p[i] == 0x5D:  # "]"
        return 0
    while i < n and count <= limit:
        i = _value_end(p, i, n)
        count += 1
        if i < 0:
            break
        i = _blank_end(p, i, n)
        if i >= n or p[i] != 0x2C:  # not ","
            break
        i = _blank_end(p, i + 1, n)
    return count


def result_shape(object result):
    """What the JSON `result` (a value msgspec has read) is: an object with a content array, typed, an error."""
    cdef Py_buffer view
    cdef int shape
    PyObject_GetBuffer(result, &view, PyBUF_SIMPLE)
    shape = _walk_shape(<const unsigned char*>view.buf, view.len)
    PyBuffer_Release(&view)
    return twin.result_shape(result) if shape < 0 else shape
