# Typed declarations of websocket.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.counters cimport Counters
from clientmcp_fast.core.websocket cimport Link

cdef class WriteQueue:
    cdef public list _dirty
    cdef public object _call_soon
    cdef public object _flush

    cpdef add(self, WebSocketProtocol protocol)
    @cython.locals(protocol=WebSocketProtocol)
    cpdef flush(self)


cdef class WebSocketProtocol(Link):
    cdef public object transport
    cdef public object server
    cdef public object session
    cdef public object _out
    cdef public object _close_timer
    cdef public object _time
    cdef public WriteQueue _writes
    cdef public Py_ssize_t _hard_bytes
    cdef public bint _paused
    cdef public object _unfed
    cdef public Py_ssize_t _unfed_at
    cdef public Counters _counters
    cdef public Py_ssize_t index

    cpdef data_received(self, data)
    cpdef _feed_slice(self)
    cpdef write(self, data)
    cpdef write_now(self, data)
    cpdef end(self, wait_for_peer)
    cpdef flush(self)
    cpdef _send(self, data)
