# Typed declarations of websocket.py for its compiled build (Cython pure-Python mode): see setup.py.

cdef class WebSocketProtocol:
    cdef public object transport
    cdef public object server
    cdef public object session
    cdef public object _out
    cdef public object _close_timer
    cdef public object _time

    cpdef data_received(self, data)
    cpdef write(self, data)
    cpdef write_now(self, data)
    cpdef flush(self)
    cpdef _send(self, data)
