"""WebSocket frames (RFC 6455 §5) as a server sees them; the pure-Python twin of `_speedups/frames.pyx`.

`FrameReader.feed()` turns the bytes a client sends into `(opcode, fin, payload)` tuples,
unmasked. An unfragmented text frame holding exactly `{"type":"ping"}` comes out as the
pseudo-opcode `OP_EXACT_PING` with an empty payload, so that the bridge answers the
ping with fixed bytes before any UTF-8 or JSON work (ClientMCP v1 §3.2, docs/protocol.md).
"""

from __future__ import annotations

from clientmcp_fast._pure.errors import FrameError

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA
# Not a wire opcode: outside the 4-bit range on purpose, so it can never collide.
OP_EXACT_PING = 0x100

EXACT_PING = b'{"type":"ping"}'
EXACT_PONG = b'{"type":"pong"}'
# The whole server frame for the pong: FIN + text opcode, unmasked, 15 bytes.
PONG_FRAME = b"\x81\x0f" + EXACT_PONG

_DATA_OPCODES = (OP_CONTINUATION, OP_TEXT, OP_BINARY)
_CONTROL_OPCODES = (OP_CLOSE, OP_PING, OP_PONG)


def unmask(payload: bytes, mask: bytes) -> bytes:
    """XOR `payload` with the 4-byte client `mask` (RFC 6455 §5.3)."""
    n = len(payload)
    if n == 0:
        return b""
    # One big-integer XOR is far faster in CPython than a per-byte loop.
    key = (mask * ((n >> 2) + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


def build_frame(opcode: int, payload: bytes) -> bytes:
    """One unfragmented, unmasked server frame."""
    n = len(payload)
    if n < 126:
        return bytes((0x80 | opcode, n)) + payload
    if n < 0x10000:
        return bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big") + payload
    return bytes((0x80 | opcode, 127)) + n.to_bytes(8, "big") + payload


def build_close(code: int, reason: bytes) -> bytes:
    """A close frame with `code` and a `reason` already cut to at most 123 bytes."""
    return build_frame(OP_CLOSE, code.to_bytes(2, "big") + reason)


class FrameReader:
    """Splits one client's byte stream into unmasked frames; errors raise `FrameError`."""

    __slots__ = ("_buffer", "_max_payload")

    def __init__(self, max_payload: int) -> None:
        # Only while a frame is split across reads: an idle connection holds no buffer.
        self._buffer: bytearray | None = None
        self._max_payload = max_payload

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """Every frame completed by `data`, in order; a partial frame stays buffered."""
        buffer = self._buffer
        if buffer:
            buffer += data
            view: bytes | bytearray = buffer
        else:
            view = data
        frames: list[tuple[int, int, bytes]] = []
        try:
            pos = self._parse(view, frames)
        except FrameError as error:
            error.frames = frames
            raise
        if buffer:
            del buffer[:pos]
            if not buffer:
                self._buffer = None
        elif pos < len(view):
            self._buffer = bytearray(view[pos:])
        return frames

    def _parse(self, view: bytes | bytearray, frames: list[tuple[int, int, bytes]]) -> int:
        """Append the complete frames of `view` to `frames`; the offset where parsing stopped."""
        pos = 0
        end_of_data = len(view)
        while end_of_data - pos >= 2:
            first = view[pos]
            second = view[pos + 1]
            if first & 0x70:
                raise FrameError(1002, "reserved bits set (no extension was negotiated)")
            opcode = first & 0x0F
            fin = first >> 7
            if opcode not in _DATA_OPCODES and opcode not in _CONTROL_OPCODES:
                raise FrameError(1002, f"unknown opcode {opcode}")
            if not second & 0x80:
                raise FrameError(1002, "client frame is not masked")
            length = second & 0x7F
            head = 6
            if length == 126:
                if end_of_data - pos < 8:
                    break
                length = (view[pos + 2] << 8) | view[pos + 3]
                head = 8
            elif length == 127:
                if end_of_data - pos < 14:
                    break
                length = int.from_bytes(view[pos + 2 : pos + 10], "big")
                if length >> 63:
                    raise FrameError(1002, "payload length has its most significant bit set")
                head = 14
            if opcode >= OP_CLOSE:
                if not fin:
                    raise FrameError(1002, "fragmented control frame")
                if length > 125:
                    raise FrameError(1002, "control frame longer than 125 bytes")
            elif length > self._max_payload:
                # Checked on the header alone, so an oversized frame is never buffered.
                raise FrameError(1009, "message larger than 4 MiB")
            frame_end = pos + head + length
            if frame_end > end_of_data:
                break
            mask = bytes(view[pos + head - 4 : pos + head])
            payload = unmask(bytes(view[pos + head : frame_end]), mask)
            if opcode == OP_TEXT and fin and payload == EXACT_PING:
                frames.append((OP_EXACT_PING, 1, b""))
            else:
                frames.append((opcode, fin, payload))
            pos = frame_end
        return pos
