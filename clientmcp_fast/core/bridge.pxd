# Typed declarations of bridge.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.calls cimport Call, InFlightCalls
from clientmcp_fast.core.counters cimport Counters
from clientmcp_fast.core.events cimport EventLog
from clientmcp_fast.core.tokens cimport Grant, TokenVerifier
from clientmcp_fast.core.tracing cimport CallTracing




cdef class Bridge:
    cdef public object limits
    cdef public TokenVerifier verifier
    cdef public object max_app_connections
    cdef public object _max_calls_per_app
    cdef public dict apps
    cdef public object app_connections
    cdef public InFlightCalls calls
    cdef public dict streams
    cdef public object stream_count
    cdef public bint shutting_down
    cdef public object _wake
    cdef public object _sweep_every
    cdef public object _sweep_at
    cdef public object _streams_tick_at
    cdef public set _announcing
    cdef public object router
    cdef public Counters counters
    cdef public EventLog events
    cdef public Py_ssize_t max_calls_per_token
    cdef public object new_session_id
    cdef public object consents
    cdef public CallTracing tracing
    cdef public dict _progress_waiting

    cpdef complete(self, Call call, result, Py_ssize_t shape, double now)
    cpdef fail(self, Call call, outcome, double now, text=*)
    @cython.locals(grant=Grant, traceparent=bytes)
    cpdef start_call(self, app, tool, arguments, Call call, now)
    cpdef abandon(self, Call call, double now)
    cpdef refused_call(self, Call call, Py_ssize_t outcome)
    cpdef refused_agent(self, Py_ssize_t reason, client_id, now)
    @cython.locals(deadline=double, timeout=double, seconds=double, grant=Grant)
    cpdef _ended(self, Call call, Py_ssize_t outcome, double now)
