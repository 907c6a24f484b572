# Typed declarations of websocket.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

from clientmcp_fast.core.counters cimport Counters
from clientmcp_fast.core.websocket cimport Link

cdef class Links:
    cdef public object server
    cdef public object loop
    cdef public object time
    cdef public Counters counters
    cdef public Py_ssize_t soft_bytes
    cdef public Py_ssize_t hard_bytes
    cdef public list _dirty
    cdef public object _flush

    cpdef write_later(self, WebSocketProtocol protocol)
    @cython.locals(protocol=WebSocketProtocol)
    cpdef flush(self)


cdef class WebSocketProtocol(Link):
    cdef public object transport
    cdef public object session
    cdef public Links _links
    cdef public object _out
    cdef public object _close_timer
    cdef public object _unfed
    # Two 4-byte fields side by side share one 8-byte word: each idle app holds one of these.
    cdef public bint _paused
    cdef public int index

    @cython.locals(links=Links)
    cpdef data_received(self, data)
    cpdef _feed_slice(self)
    cpdef write(self, data)
    cpdef write_now(self, data)
    cpdef end(self, wait_for_peer)
    cpdef flush(self)
    @cython.locals(links=Links)
    cpdef _send(self, data)
