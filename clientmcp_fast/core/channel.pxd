# Typed declarations of channel.py for its compiled build (Cython pure-Python mode): see setup.py.

from clientmcp_fast.core.bridge cimport Bridge
from clientmcp_fast.core.websocket cimport WebSocket


cdef class AppChannel(WebSocket):
    cdef public Bridge bridge
    cdef public object client_id
    cdef public object toolset
    cdef public dict calls
    cdef public double last_seen
    cdef public object congested_since

    cpdef receive_data(self, data, now)
    cpdef send(self, message)
    cpdef close(self, code, reason, now)
    cpdef call_ended(self, call, Py_ssize_t outcome)
    cpdef on_exact_ping(self)
    cpdef on_text(self, payload)
    cpdef on_binary(self, payload)
    cpdef on_close(self, code, reason)
    cpdef _on_result(self, message)
