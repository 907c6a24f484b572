from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t


# llhttp 9.4 as httptools 0.9 carries it (its vendor/llhttp/include/llhttp.h): the parser's
# functions are looked up in httptools' own module at import, so these layouts must be that
# release's. The import checks the version and parses a probe request before it is used.
cdef struct llhttp_t:
    int32_t _index
    void* _span_pos0
    void* _span_cb0
    int32_t error
    const char* reason
    const char* error_pos
    void* data
    void* _current
    uint64_t content_length
    uint8_t type
    uint8_t method
    uint8_t http_major
    uint8_t http_minor
    uint8_t header_state
    uint16_t lenient_flags
    uint8_t upgrade
    uint8_t finish
    uint16_t flags
    uint16_t status_code
    uint8_t initial_message_completed
    void* settings

ctypedef int (*llhttp_data_cb)(llhttp_t*, const char*, size_t) noexcept
ctypedef int (*llhttp_cb)(llhttp_t*) noexcept

cdef struct llhttp_settings_t:
    llhttp_cb on_message_begin
    llhttp_data_cb on_protocol
    llhttp_data_cb on_url
    llhttp_data_cb on_status
    llhttp_data_cb on_method
    llhttp_data_cb on_version
    llhttp_data_cb on_header_field
    llhttp_data_cb on_header_value
    llhttp_data_cb on_chunk_extension_name
    llhttp_data_cb on_chunk_extension_value
    llhttp_cb on_headers_complete
    llhttp_data_cb on_body
    llhttp_cb on_message_complete
    llhttp_cb on_protocol_complete
    llhttp_cb on_url_complete
    llhttp_cb on_status_complete
    llhttp_cb on_method_complete
    llhttp_cb on_version_complete
    llhttp_cb on_header_field_complete
    llhttp_cb on_header_value_complete
    llhttp_cb on_chunk_extension_name_complete
    llhttp_cb on_chunk_extension_value_complete
    llhttp_cb on_chunk_header
    llhttp_cb on_chunk_complete
    llhttp_cb on_reset


cdef struct Span:
    # A header name or value being read: llhttp may hand it over in pieces, across reads.
    char* data
    Py_ssize_t size
    Py_ssize_t capacity
    bint present  # a piece came (a value may be present and empty)


cdef class RequestReader:
    cdef llhttp_t _llhttp
    cdef char _llhttp_spare[64]  # room, should a llhttp_t of another release be larger
    cdef object _queue
    cdef object _enqueue
    cdef Py_ssize_t _max_head
    cdef bint _echo
    cdef bytes _target
    cdef list _known  # by KNOWN_NAMES position: the values of those headers (see Request)
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
