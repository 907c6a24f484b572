# Typed declarations of log_lines.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.calls cimport Call
from clientmcp_fast.core.events cimport EventLog


@cython.locals(micros=Py_ssize_t, whole=Py_ssize_t, fraction=Py_ssize_t)
cpdef str seconds_text(double seconds)

@cython.locals(millis=Py_ssize_t, second=Py_ssize_t)
cpdef str stamp(double now)


cdef class EventLines(EventLog):
    cdef public object _logger
    cdef public Py_ssize_t _level
    cdef public bint _calls
    cdef public object _schedule
    cdef public object _stream
    cdef public bint _json
    cdef public list _pending
    cdef public dict _texts
    cdef public list _next_refusal_line_at
    cdef public list _not_logged

    @cython.locals(ended=Call, modern=bint, streamed=bint, texts=dict, pending=list, who=str, what=str,
                   ending=str)
    cpdef call_ended(self, call, Py_ssize_t outcome, double seconds)
    @cython.locals(pending=list, start=str)
    cpdef flush(self)
    cpdef str _text(self, value)
    cpdef app_connected(self, client_id)
    cpdef app_closed(self, client_id, code, reason)
    cpdef app_refused(self, reason)
    cpdef register_refused(self, client_id, reason)
    cpdef agent_refused(self, Py_ssize_t reason, client_id, double now)
    cpdef agent_unauthorized(self, problem)
    cpdef cluster_message_too_large(self, client_id, limit)
    cpdef cluster_message_dropped(self, reason, detail)
    cpdef cluster_wire_mismatch(self, instance, version, ours)
    cpdef cluster_apps_not_kept(self, max_kept)
    cpdef cluster_stalled(self, seconds)
    cpdef _event(self, int level, str name, dict fields)
    cpdef _message(self, int level, str text)
    cpdef _record(self, int level, str name, dict fields)
