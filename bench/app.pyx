# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The bench's app: a compiled ClientMCP client that answers every `call` to `echo` at about 1 µs.

Why this exists beside `clientmcp_fast.client`: that library is for apps (JSON decoding,
handlers, reconnects, a task per call); here it would spend more CPU per call than the
bridge, and it shares a core with wrk. This is a load fixture only: one asyncio Protocol
on uvloop that upgrades to `/connect` (subprotocols `clientmcp.v1, <client token>`),
registers one tool `echo`, and for each `call` frame finds the id by byte search (the
bridge sends exactly `{"type":"call","id":"<digits>",...}`) and answers a fixed result.
All answers produced by one `data_received` go out in one `transport.write`, as masked
frames with a zero key (RFC 6455 allows any key; zero makes masking a copy). Server
frames are parsed across TCP chunk boundaries, with 7-, 16- and 64-bit lengths.

Run by `bench/run.py`, which compiles it into `bench/_build/`: `run(host, port, token)`
prints `ready` once registered, and `answered <calls>` when SIGTERM stops it.
"""

import asyncio
import base64
import hashlib
import os
import signal
import sys

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy

cdef bytes CALL_PREFIX = b'{"type":"call","id":"'
cdef bytes REGISTERED = b'{"type":"registered"}'
cdef bytes RESULT_HEAD = b'{"type":"result","id":"'
cdef bytes RESULT_TAIL = b'","result":{"content":[{"type":"text","text":"hi"}]}}'
REGISTER = b'{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}'
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


cdef class App:
    """One app connection; its protocol methods are what uvloop calls."""

    cdef object transport
    cdef bytes request
    cdef bytes accept
    cdef bytes pending          # bytes of an incomplete frame (or of the HTTP head)
    cdef bint upgraded
    cdef char *out              # answers of the current data_received
    cdef Py_ssize_t out_len, out_cap
    cdef public object ready    # future: registered
    cdef public object closed   # future: the connection ended
    cdef public long long answered

    def __cinit__(self):
        self.out_cap = 65536
        self.out = <char *>malloc(self.out_cap)
        if self.out == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.out)

    def __init__(self, str host, int port, str token, loop):
        key = base64.b64encode(os.urandom(16))
        self.accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
        self.request = (
            b"GET /connect HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: clientmcp.v1, %s\r\n\r\n"
        ) % (host.encode(), port, key, token.encode())
        self.pending = b""
        self.ready = loop.create_future()
        self.closed = loop.create_future()
        self.answered = 0

    # -- asyncio protocol ---------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def data_received(self, bytes data):
        if self.pending:
            data = self.pending + data
            self.pending = b""
        if not self.upgraded:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                self.pending = data
                return
            head = data[:end].lower()
            if not head.startswith(b"http/1.1 101") or b"sec-websocket-accept: " + self.accept.lower() not in head:
                self._fail("upgrade refused: " + data[:end].decode("latin-1"))
                return
            self.upgraded = True
            self.transport.write(_frame(1, REGISTER))
            data = data[end + 4:]
        self.out_len = 0
        cdef Py_ssize_t used = self._frames(data)
        if used < PyBytes_GET_SIZE(data):
            self.pending = data[used:]
        if self.out_len:
            self.transport.write(PyBytes_FromStringAndSize(self.out, self.out_len))

    def eof_received(self):
        return False

    def connection_lost(self, exc):
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("the bridge closed the connection before registered"))
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self):
        pass

    def resume_writing(self):
        pass

    # -- frames -------------------------------------------------------------------------

    cdef Py_ssize_t _frames(self, bytes data) except -1:
        """Handles every whole frame in `data`; returns how many bytes they took."""
        cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t pos = 0, head, start
        cdef unsigned long long length
        cdef int opcode, i
        while n - pos >= 2:
            opcode = p[pos] & 0x0F
            if p[pos + 1] & 0x80:
                self._fail("the bridge sent a masked frame")
                return n
            length = p[pos + 1] & 0x7F
            head = 2
            if length == 126:
                if n - pos < 4:
                    break
                length = (<unsigned long long>p[pos + 2] << 8) | p[pos + 3]
                head = 4
            elif length == 127:
                if n - pos < 10:
                    break
                length = 0
                for i in range(8):
                    length = (length << 8) | p[pos + 2 + i]
                head = 10
            if <unsigned long long>(n - pos - head) < length:
                break
            start = pos + head
            if opcode == 1:
                if not (p[pos] & 0x80):
                    self._fail("the bridge sent a fragmented message")
                    return n
                self._text(p + start, <Py_ssize_t>length)
            elif opcode == 8:
                self.transport.write(_frame(8, data[start:start + 2]))
                self.transport.close()
                return n
            elif opcode == 9:
                self._add_frame(0xA, <const char *>(p + start), <Py_ssize_t>length)
            pos = start + <Py_ssize_t>length
        return pos

    cdef int _text(self, const unsigned char *payload, Py_ssize_t length) except -1:
        cdef Py_ssize_t prefix = PyBytes_GET_SIZE(CALL_PREFIX)
        cdef const unsigned char *id_start
        cdef const unsigned char *id_end
        if length > prefix and memcmp(payload, PyBytes_AS_STRING(CALL_PREFIX), prefix) == 0:
            id_start = payload + prefix
            id_end = <const unsigned char *>memchr(id_start, 0x22, length - prefix)  # '"'
            if id_end == NULL:
                self._fail("a call without an id")
                return -1
            self._answer(<const char *>id_start, id_end - id_start)
        elif length == PyBytes_GET_SIZE(REGISTERED) and memcmp(payload, PyBytes_AS_STRING(REGISTERED), length) == 0:
            if not self.ready.done():
                self.ready.set_result(None)
        # cancel and anything else: nothing to do for an app that answers at once.
        return 0

    cdef int _answer(self, const char *call_id, Py_ssize_t id_len) except -1:
        cdef Py_ssize_t head_len = PyBytes_GET_SIZE(RESULT_HEAD), tail_len = PyBytes_GET_SIZE(RESULT_TAIL)
        cdef Py_ssize_t payload = head_len + id_len + tail_len
        cdef char *w = self._reserve(payload)
        memcpy(w, PyBytes_AS_STRING(RESULT_HEAD), head_len)
        memcpy(w + head_len, call_id, id_len)
        memcpy(w + head_len + id_len, PyBytes_AS_STRING(RESULT_TAIL), tail_len)
        self.answered += 1
        return 0

    cdef int _add_frame(self, int opcode, const char *payload, Py_ssize_t length) except -1:
        memcpy(self._reserve_frame(opcode, length), payload, length)
        return 0

    cdef char *_reserve(self, Py_ssize_t length) except NULL:
        return self._reserve_frame(1, length)

    cdef char *_reserve_frame(self, int opcode, Py_ssize_t length) except NULL:
        """Room for one masked frame (zero key) of `length` payload bytes; returns where the payload goes."""
        cdef Py_ssize_t need = self.out_len + length + 8
        cdef char *grown
        cdef unsigned char *h
        if need > self.out_cap:
            while need > self.out_cap:
                self.out_cap *= 2
            grown = <char *>realloc(self.out, self.out_cap)
            if grown == NULL:
                raise MemoryError()
            self.out = grown
        h = <unsigned char *>(self.out + self.out_len)
        h[0] = 0x80 | opcode
        if length < 126:
            h[1] = 0x80 | length
            h += 2
        else:  # answers stay far below 64 KiB
            h[1] = 0x80 | 126
            h[2] = (length >> 8) & 0xFF
            h[3] = length & 0xFF
            h += 4
        h[0] = h[1] = h[2] = h[3] = 0
        h += 4
        self.out_len = (<char *>h - self.out) + length
        return <char *>h

    cdef _fail(self, str problem):
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(problem))
        print(f"bench app: {problem}", file=sys.stderr, flush=True)
        self.transport.abort()


def _frame(int opcode, bytes payload):
    """One masked client frame with a zero key (so the payload goes as it is)."""
    cdef Py_ssize_t n = len(payload)
    if n < 126:
        return bytes((0x80 | opcode, 0x80 | n, 0, 0, 0, 0)) + payload
    return bytes((0x80 | opcode, 0x80 | 126, n >> 8, n & 0xFF, 0, 0, 0, 0)) + payload


async def _main(str host, int port, str token):
    loop = asyncio.get_running_loop()
    app = App(host, port, token, loop)
    await loop.create_connection(lambda: app, host, port)
    await asyncio.wait_for(app.ready, 30)
    print("ready", flush=True)
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, lambda: stop.done() or stop.set_result(None))
    await asyncio.wait([stop, app.closed], return_when=asyncio.FIRST_COMPLETED)
    print(f"answered {app.answered}", flush=True)
    if not stop.done():
        print("bench app: the bridge closed the connection", file=sys.stderr, flush=True)
        raise SystemExit(1)


def run(str host, int port, str token):
    """Connect, register `echo`, answer calls until SIGTERM."""
    import uvloop

    uvloop.run(_main(host, port, token))
