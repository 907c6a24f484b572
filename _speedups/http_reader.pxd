cdef class RequestReader:
    cdef object _parser
    cdef object _queue
    cdef Py_ssize_t _max_head
    cdef bint _echo
    cdef bytes _target
    cdef dict _headers
    cdef object _repeated
    cdef list _body
    cdef Py_ssize_t _body_size
    cdef Py_ssize_t _head_bytes
    cdef Py_ssize_t _unreported
    cdef bint _reported
    cdef bint _http11
    cdef public bint in_head
    cdef public bint in_body
    cdef public bint expect_continue
    cdef public bint stopped
    cdef public object upgrade
    cdef public object refusal

    cpdef feed(self, object data)
    cdef bint _hand_off(self, bytes tail) except -1
    cdef _refuse(self, int status, str text)
    cdef _new_message(self)
    cdef _too_large(self)
