# Typed declarations of events.py for its compiled build (Cython pure-Python mode): see setup.py.
# A cdef class, so that the core's calls to the event log are C calls.


cdef class EventLog:
    cpdef call_ended(self, call, Py_ssize_t outcome, double seconds)
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
