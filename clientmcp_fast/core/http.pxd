# Typed declarations of http.py for its compiled build (Cython pure-Python mode): see setup.py.
# The helper every answer runs, as a C function the typed modules call directly; `Exchange`
# a cdef class, so that the core's calls to it are C calls.

cimport cython

from clientmcp_fast.core.memo cimport remember


cdef list _LENGTH_LINES

@cython.locals(prefix=bytes, known=dict)
cdef bytes _head_prefix(int status, headers, bint close)
@cython.locals(line=bytes)
cdef bytes _length_line(Py_ssize_t length)
@cython.locals(prefix=bytes, length=bytes)
cpdef bytes response_message(int status, headers, body, bint close, bint with_body=*)
@cython.locals(prefix=bytes)
cpdef bytes response_head(int status, headers, bint close, bint chunked=*)


cdef class Request:
    cdef public bytes method
    cdef public bytes target
    cdef public list known
    cdef public dict others
    cdef public object repeated
    cdef public object body
    cdef public bint keep_alive
    cdef public bint http11
    cdef dict _headers

    cpdef object header(self, Py_ssize_t index)


cdef class Exchange:
    cdef public Request request
    cdef public object on_abandon

    cpdef respond(self, status, headers, body)
    cpdef start_stream(self, headers)
    cpdef stream(self, data)
    cpdef end_stream(self)
    cpdef backlog(self)
