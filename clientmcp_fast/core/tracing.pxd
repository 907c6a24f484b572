# Typed declarations of tracing.py for its compiled build (Cython pure-Python mode): see setup.py.
# The traceparent check as a C loop, and `CallTracing` a cdef class, so that the bridge's calls
# to a tracer are C calls.

cimport cython


@cython.locals(length=Py_ssize_t, data=bytes, chars=cython.p_uchar, index=Py_ssize_t, byte=cython.uchar, trace_id=bint, parent_id=bint, version=int)
cpdef valid_traceparent(value)


cdef class CallTracing:
    cpdef started(self, call)
    cpdef ended(self, call, Py_ssize_t outcome)
