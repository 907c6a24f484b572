# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""WebSocket frames (RFC 6455 §5) as a server sees them; the compiled twin of `clientmcp_fast/_pure/frames.py`.

Same contract as the twin, tested for identical results: `FrameReader.feed()` returns
`(opcode, fin, payload)` tuples, unmasked, and the exact `{"type":"ping"}` text frame as
`(OP_EXACT_PING, 1, b"")` so it is answered before any UTF-8 or JSON work.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcmp, memcpy

from clientmcp_fast._pure.errors import FrameError
from clientmcp_fast._pure.frames import OP_EXACT_PING

cdef enum:
    _OP_TEXT = 0x1
    _OP_BINARY = 0x2
    _OP_CLOSE = 0x8
    _OP_PONG = 0xA

cdef const char* _PING_TEXT = b'{"type":"ping"}'
cdef tuple _EXACT_PING_FRAME = (OP_EXACT_PING, 1, b"")


cdef inline void _unmask_into(uint8_t* out, const uint8_t* data, Py_ssize_t n, const uint8_t* mask) noexcept nogil:
    cdef uint8_t key[8]
    cdef uint64_t key64, word
    cdef Py_ssize_t i = 0
    for i in range(8):
        key[i] = mask[i & 3]
    memcpy(&key64, key, 8)
    i = 0
    # Eight bytes at a time: the mask repeats every 4 bytes, so an 8-byte key keeps its
    # phase at every multiple of 8 from the payload start. memcpy keeps loads unaligned-safe.
    while i + 8 <= n:
        memcpy(&word, data + i, 8)
        word ^= key64
        memcpy(out + i, &word, 8)
        i += 8
    while i < n:
        out[i] = data[i] ^ mask[i & 3]
        i += 1


cpdef bytes unmask(bytes payload, bytes mask):
    """XOR `payload` with the 4-byte client `mask` (RFC 6455 §5.3)."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(payload)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n)
    _unmask_into(<uint8_t*>PyBytes_AS_STRING(out), <const uint8_t*>PyBytes_AS_STRING(payload), n,
                 <const uint8_t*>PyBytes_AS_STRING(mask))
    return out


cpdef bytes build_frame(int opcode, bytes payload):
    """One unfragmented, unmasked server frame."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(payload)
    cdef Py_ssize_t head = 2 if n < 126 else (4 if n < 0x10000 else 10)
    cdef bytes frame = PyBytes_FromStringAndSize(NULL, head + n)
    cdef uint8_t* out = <uint8_t*>PyBytes_AS_STRING(frame)
    cdef int shift
    out[0] = 0x80 | opcode
    if head == 2:
        out[1] = <uint8_t>n
    elif head == 4:
        out[1] = 126
        out[2] = <uint8_t>(n >> 8)
        out[3] = <uint8_t>n
    else:
        out[1] = 127
        for shift in range(8):
            out[2 + shift] = <uint8_t>((<uint64_t>n) >> (56 - 8 * shift))
    memcpy(out + head, PyBytes_AS_STRING(payload), n)
    return frame


cpdef bytes build_close(int code, bytes reason):
    """A close frame with `code` and a `reason` already cut to at most 123 bytes."""
    cdef bytes payload = bytes((code >> 8, code & 0xFF)) + reason
    return build_frame(_OP_CLOSE, payload)


cdef class FrameReader:
    """Splits one client's byte stream into unmasked frames; errors raise `FrameError`."""

    def __init__(self, Py_ssize_t max_payload):
        # Only while a frame is split across reads: an idle connection holds no buffer.
        self._buffer = None
        self._max_payload = max_payload

    cpdef list feed(self, object data):
        """Every frame completed by `data`, in order; a partial frame stays buffered."""
        cdef Py_buffer view
        cdef const uint8_t* buf
        cdef Py_ssize_t size, pos = 0, head, frame_end
        cdef uint64_t length
        cdef int first, second, opcode, fin
        cdef bint buffered = self._buffer is not None
        cdef bytes payload
        cdef uint8_t text[15]
        cdef list frames = []
        if buffered:
            self._buffer += data
            buf = <const uint8_t*>PyByteArray_AS_STRING(self._buffer)
            size = PyByteArray_GET_SIZE(self._buffer)
        else:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            buf = <const uint8_t*>view.buf
            size = view.len
        try:
            while size - pos >= 2:
                first = buf[pos]
                second = buf[pos + 1]
                if first & 0x70:
                    raise FrameError(1002, "reserved bits set (no extension was negotiated)")
                opcode = first & 0x0F
                fin = first >> 7
                if (opcode > _OP_BINARY and opcode < _OP_CLOSE) or opcode > _OP_PONG:
                    raise FrameError(1002, f"unknown opcode {opcode}")
                if not second & 0x80:
                    raise FrameError(1002, "client frame is not masked")
                length = second & 0x7F
                head = 6
                if length == 126:
                    if size - pos < 8:
                        break
                    length = (<uint64_t>buf[pos + 2] << 8) | buf[pos + 3]
                    head = 8
                elif length == 127:
                    if size - pos < 14:
                        break
                    length = 0
                    for frame_end in range(2, 10):
                        length = (length << 8) | buf[pos + frame_end]
                    if length >> 63:
                        raise FrameError(1002, "payload length has its most significant bit set")
                    head = 14
                if opcode >= _OP_CLOSE:
                    if not fin:
                        raise FrameError(1002, "fragmented control frame")
                    if length > 125:
                        raise FrameError(1002, "control frame longer than 125 bytes")
                elif length > <uint64_t>self._max_payload:
                    # Checked on the header alone, so an oversized frame is never buffered.
                    raise FrameError(1009, "message larger than 4 MiB")
                frame_end = pos + head + <Py_ssize_t>length
                if frame_end > size:
                    break
                if opcode == _OP_TEXT and fin and length == 15:
                    # The exact ping is unmasked and compared on the stack: no bytes object at all.
                    _unmask_into(text, buf + pos + head, 15, buf + pos + head - 4)
                    if memcmp(text, _PING_TEXT, 15) == 0:
                        frames.append(_EXACT_PING_FRAME)
                    else:
                        frames.append((opcode, fin, PyBytes_FromStringAndSize(<char*>text, 15)))
                else:
                    payload = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>length)
                    _unmask_into(<uint8_t*>PyBytes_AS_STRING(payload), buf + pos + head, <Py_ssize_t>length,
                                 buf + pos + head - 4)
                    frames.append((opcode, fin, payload))
                pos = frame_end
        except FrameError as error:
            error.frames = frames
            raise
        finally:
            if not buffered:
                PyBuffer_Release(&view)
        if buffered:
            del self._buffer[:pos]
            if not self._buffer:
                self._buffer = None
        elif pos < size:
            self._buffer = bytearray(data[pos:])
        return frames
