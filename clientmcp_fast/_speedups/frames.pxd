from libc.stdint cimport uint8_t


cdef class FrameReader:
    cdef bytearray _buffer
    cdef Py_ssize_t _max_payload

    cpdef list feed(self, object data)


cpdef bytes unmask(bytes payload, bytes mask)
cpdef bytes build_frame(int opcode, bytes payload)
cpdef bytes build_close(int code, bytes reason)
