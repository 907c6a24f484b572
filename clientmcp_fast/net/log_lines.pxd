# Typed declarations of log_lines.py for its compiled build (Cython pure-Python mode): see setup.py.

cimport cython


@cython.locals(micros=Py_ssize_t, whole=Py_ssize_t, fraction=Py_ssize_t)
cpdef str seconds_text(double seconds)


cdef class CallLog:
    cdef public object _schedule
    cdef public object _stream
    cdef public bint _json
    cdef public list _pending
    cdef public dict _texts

    cpdef ended(self, call, Py_ssize_t outcome, double seconds)
    cpdef flush(self)
    cpdef str _text(self, value)
