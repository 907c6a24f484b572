from libc.stdint cimport uint8_t, uint64_t


# llhttp's own header, vendor/llhttp/include/llhttp.h, whose C (vendor/llhttp/src) setup.py
# compiles into this module: only what the reader uses is declared here, and the C compiler
# lays the structs out from the header itself, whatever else they hold.
cdef extern from "llhttp.h":
    enum:
        LLHTTP_VERSION_MAJOR
        LLHTTP_VERSION_MINOR
        LLHTTP_VERSION_PATCH

    ctypedef struct llhttp_t:
        void* data
        uint64_t content_length
        uint8_t method
        uint8_t http_major
        uint8_t http_minor
        uint8_t upgrade

    ctypedef int (*llhttp_data_cb)(llhttp_t*, const char* at, size_t length) noexcept
    ctypedef int (*llhttp_cb)(llhttp_t*) noexcept

    ctypedef struct llhttp_settings_t:
        llhttp_cb on_message_begin
        llhttp_data_cb on_url
        llhttp_data_cb on_header_field
        llhttp_data_cb on_header_value
        llhttp_cb on_headers_complete
        llhttp_data_cb on_body
        llhttp_cb on_message_complete
        llhttp_cb on_chunk_header
        llhttp_cb on_chunk_complete

    ctypedef enum llhttp_type_t:
        HTTP_REQUEST

    ctypedef enum llhttp_errno_t:
        HPE_OK
        HPE_PAUSED_UPGRADE

    ctypedef int llhttp_method_t  # an enum in C: the method's number, as llhttp_t.method holds it

    void llhttp_settings_init(llhttp_settings_t* settings) noexcept
    void llhttp_init(llhttp_t* parser, llhttp_type_t type, const llhttp_settings_t* settings) noexcept
    llhttp_errno_t llhttp_execute(llhttp_t* parser, const char* data, size_t length) noexcept
    void llhttp_resume_after_upgrade(llhttp_t* parser) noexcept
    const char* llhttp_get_error_pos(const llhttp_t* parser) noexcept
    int llhttp_should_keep_alive(const llhttp_t* parser) noexcept
    const char* llhttp_method_name(llhttp_method_t method) noexcept


cdef struct Span:
    # A header name or value being read: llhttp may hand it over in pieces, across reads.
    char* data
    Py_ssize_t size
    Py_ssize_t capacity
    bint present  # a piece came (a value may be present and empty)


cdef class RequestReader:
    cdef llhttp_t _llhttp
    cdef object _queue
    cdef object _enqueue
    cdef object _make_request
    cdef Py_ssize_t _max_head
    cdef Py_ssize_t _max_body
    cdef bytes _target
    cdef list _known  # by KNOWN_NAMES position: the values of those headers
    cdef dict _others  # the other headers, or None
    cdef dict _repeated  # the values of each repeated header
    cdef list _last_values  # by KNOWN_NAMES index: the value last read under that name
    cdef object _body  # None, the one piece read, or a list of the pieces
    cdef Py_ssize_t _body_size
    cdef Py_ssize_t _head_bytes
    cdef Py_ssize_t _unreported
    cdef bint _reported
    cdef bint _http11
    cdef Span _name
    cdef Span _value
    cdef object _pending  # the refusal a callback asked for, as (status, text)
    cdef object _failure  # an exception a callback raised, raised again after llhttp_execute
    cdef public bint in_head
    cdef public bint in_body
    cdef public bint expect_continue
    cdef public bint stopped
    cdef public object upgrade
    cdef public object refusal

    cpdef int feed(self, bytes data) except -1
    cdef _parse(self, bytes data)
    cdef bint _hand_off(self, bytes tail) except -1
    cdef _refuse(self, int status, str text)
    cdef _new_message(self)
    cdef _add_request(self, object body, bint keep_alive)
    cdef _too_large(self)
    cdef bytes _value_bytes(self, Py_ssize_t index)
    cdef _join_repeated(self)
    cdef bytes _method(self)
    cdef int _message_begin(self) except -1
    cdef int _url(self, const char* at, size_t length) except -1
    cdef int _header_field(self, const char* at, size_t length) except -1
    cdef int _header_value(self, const char* at, size_t length) except -1
    cdef int _report_header(self) except -1
    cdef int _headers_complete(self) except -1
    cdef int _body_piece(self, const char* at, size_t length) except -1
    cdef int _message_complete(self) except -1
    cdef int _chunk_header(self) except -1
