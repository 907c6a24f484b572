# Typed declarations of websocket.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython

cimport clientmcp_fast._speedups.frames as frames


cdef class Link:
    cpdef write(self, data)
    cpdef write_now(self, data)
    cpdef end(self, wait_for_peer)


cdef class WebSocket(frames.FrameReader):
    cdef public Link _link
    cdef public object _fragments
    cdef public object state

    cpdef on_text(self, payload)
    cpdef on_binary(self, payload)
    cpdef on_exact_ping(self)
    cpdef on_close(self, code, reason)
    cpdef receive_bytes(self, data)
    cpdef send_text(self, payload)
    cpdef send_frame(self, frame)
    cpdef send_close(self, code, reason)
