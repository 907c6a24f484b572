# Typed declarations of tracing.py for its compiled build (Cython pure-Python mode): see setup.py.
# The traceparent check as a C loop, and `CallTracing` a cdef class, so that the bridge's calls
# to a tracer are C calls.

cimport cython


cdef Py_ssize_t TRACEPARENT_CHARS, MAX_TRACEPARENT_CHARS

@cython.locals(length=Py_ssize_t, data=bytes, chars=cython.p_uchar, version=int)
cpdef bytes valid_traceparent(value)
cdef bytes _LOWER_HEX

@cython.locals(index=Py_ssize_t, byte=cython.uchar, other=cython.uchar, table=cython.p_uchar)
cdef int _hex_id(const unsigned char* chars, Py_ssize_t start, Py_ssize_t end)


cdef class CallTracing:
    cpdef started(self, call)
    cpdef ended(self, call, Py_ssize_t outcome)
