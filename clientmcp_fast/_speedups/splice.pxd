from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.string cimport memcpy


cdef inline char* _put(char* at, bytes piece) noexcept:
    """Copy `piece` to `at`; where the next piece goes."""
    cdef Py_ssize_t size = PyBytes_GET_SIZE(piece)
    memcpy(at, PyBytes_AS_STRING(piece), size)
    return at + size
