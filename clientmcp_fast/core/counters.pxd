# Typed declarations of counters.py for its compiled build (Cython pure-Python mode): see setup.py.
# Every attribute of __slots__ is declared here, public so the collector reads them from Python.

cimport cython


cdef class Counters:
    cdef public Py_ssize_t app_connections_opened
    cdef public Py_ssize_t app_connections_closed
    cdef public dict closes
    cdef public Py_ssize_t registers_accepted
    cdef public Py_ssize_t registers_refused
    cdef public Py_ssize_t calls_started
    cdef public Py_ssize_t calls_result
    cdef public list calls_ended
    cdef public Py_ssize_t calls_streamed
    cdef public Py_ssize_t bucket_0
    cdef public Py_ssize_t bucket_1
    cdef public Py_ssize_t bucket_2
    cdef public Py_ssize_t bucket_3
    cdef public Py_ssize_t bucket_4
    cdef public Py_ssize_t bucket_5
    cdef public Py_ssize_t bucket_6
    cdef public Py_ssize_t bucket_7
    cdef public Py_ssize_t bucket_8
    cdef public Py_ssize_t bucket_9
    cdef public Py_ssize_t bucket_10
    cdef public Py_ssize_t bucket_11
    cdef public Py_ssize_t bucket_12
    cdef public Py_ssize_t bucket_13
    cdef public Py_ssize_t bucket_14
    cdef public Py_ssize_t bucket_15
    cdef public Py_ssize_t bucket_16
    cdef public double duration_sum
    cdef public Py_ssize_t list_changed_sent
    cdef public dict http_responses
    cdef public Py_ssize_t responses_200
    cdef public list requests
    cdef public Py_ssize_t legacy_tools_calls
    cdef public Py_ssize_t modern_tools_calls
    cdef public Py_ssize_t http_bytes_in
    cdef public Py_ssize_t http_bytes_out
    cdef public Py_ssize_t websocket_bytes_in
    cdef public Py_ssize_t websocket_bytes_out
    cdef public list forwarded
    cdef public list served
    cdef public list refusals

    cpdef closed(self, code)
    cpdef call_ended(self, Py_ssize_t outcome, double seconds, bint streamed)
    cpdef responded(self, Py_ssize_t status)
    cpdef dict responses(self)
    @cython.locals(index=Py_ssize_t)
    cpdef request(self, bint modern, method)
