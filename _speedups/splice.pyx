# cython: language_level=3
"""JSON bytes passed through, spliced into messages; the compiled twin of `clientmcp_fast/_pure/splice.py`.

One allocation and a copy per piece, where `b"".join` of a buffer that is not bytes asks
every piece for its buffer.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy

from clientmcp_fast._pure import splice as twin

# The twin's fixed pieces (one definition serves both), held as typed C globals.
cdef bytes _RESULT_HEAD = twin.RESULT_HEAD
cdef bytes _RESULT_MIDDLE = twin.RESULT_MIDDLE
cdef bytes _CALL_HEAD = twin.CALL_HEAD
cdef bytes _CALL_NAME = twin.CALL_NAME
cdef bytes _CALL_ARGUMENTS = twin.CALL_ARGUMENTS


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


cdef bytes _spliced(bytes a, bytes b, bytes c, bytes d, bytes e, object json):
    """Five bytes pieces (b"" for none), then the JSON that `json` holds (any buffer), then "}"."""
    # Pieces as C arguments, not a tuple: this runs twice per call.
    cdef Py_buffer view
    cdef char* at
    PyObject_GetBuffer(json, &view, PyBUF_SIMPLE)
    try:
        message = PyBytes_FromStringAndSize(
            NULL,
            PyBytes_GET_SIZE(a) + PyBytes_GET_SIZE(b) + PyBytes_GET_SIZE(c) + PyBytes_GET_SIZE(d)
            + PyBytes_GET_SIZE(e) + view.len + 1,
        )
        at = _put(_put(_put(_put(_put(PyBytes_AS_STRING(message), a), b), c), d), e)
        memcpy(at, view.buf, view.len)
        at[view.len] = 0x7D  # "}"
        return message
    finally:
        PyBuffer_Release(&view)


def jsonrpc_result(bytes id_json not None, object result):
    """A JSON-RPC response around a result that is JSON already."""
    return _spliced(_RESULT_HEAD, id_json, _RESULT_MIDDLE, b"", b"", result)


def call_message(bytes call_id not None, bytes name not None, object arguments):
    """A `call` for the app; `call_id` and `name` (a registered tool name) never need escaping."""
    return _spliced(_CALL_HEAD, call_id, _CALL_NAME, name, _CALL_ARGUMENTS, arguments)
