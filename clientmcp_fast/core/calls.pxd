# Typed declarations of calls.py for its compiled build (Cython pure-Python mode): see setup.py.
# Every attribute of __slots__ is declared here, public so Python code sees what it saw before.

from clientmcp_fast.core.tokens cimport Grant


cdef class Call:
    cdef public Py_ssize_t seq
    cdef public str id
    cdef public object app
    cdef public object deadline
    cdef public object slow_at
    cdef public bint wants_stream
    cdef public bint streaming
    cdef public Grant grant
    cdef public object client_id
    cdef public object tool
    cdef public bint modern
    cdef public bint logged
    cdef public bytes traceparent
    cdef public object tracestate
    cdef public object span
    cdef public object progress

    cpdef init_call(self, bint wants_stream)
    cpdef call_result(self, result, has_result_type)
    cpdef call_error(self, text)
    cpdef call_slow(self)
    cpdef call_tick(self)
    cpdef call_progress(self, report)
    cpdef ended(self, Py_ssize_t outcome)
    cpdef bint named_by_cancel(self, request_id, session)


cdef class InFlightCalls:
    cdef public object timeout
    cdef public Py_ssize_t _seq
    cdef public dict _waiting
    cdef public dict _streaming
    cdef public object _next_tick
    cdef public bint _switch_armed

    cpdef start(self, Call call, app, now)
    cpdef finish(self, Call call)
    cpdef stream_now(self, Call call, now)
