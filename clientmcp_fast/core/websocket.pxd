# Typed declarations of websocket.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython


cdef class Link:
    cpdef write(self, data)
    cpdef write_now(self, data)
    cpdef end(self, wait_for_peer)


cdef class MessageHandler:
    cpdef on_text(self, payload)
    cpdef on_binary(self, payload)
    cpdef on_exact_ping(self)
    cpdef on_close(self, code, reason)


cdef class WebSocket:
    cdef public object _reader
    cdef public Link _link
    cdef public MessageHandler _handler
    cdef public object _parts
    cdef public object _parts_opcode
    cdef public object _utf8
    cdef public object state

    @cython.locals(handler=MessageHandler)
    cpdef receive_data(self, data)
    cpdef send_text(self, payload)
    cpdef send_frame(self, frame)
    cpdef close(self, code, reason)
