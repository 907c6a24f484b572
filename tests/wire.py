"""What a WebSocket client puts on the wire and what a server sends back, built independently of the package.

RFC 6455 §5 written out once for every test directory: client frames (masked with a
given key, any length form, reserved bits, unmasked on purpose) and a strict reader of
server frames. None of it imports the package, so no check trusts the code under test.
"""

from __future__ import annotations

import enum
import io
import struct
from collections.abc import Callable

MASK = b"\x37\xfa\x21\x3d"


class Op(enum.IntEnum):
    """The opcodes of RFC 6455 §5.2, written out here rather than taken from the package."""

    CONTINUATION = 0x0
    TEXT = 0x1
    BINARY = 0x2
    CLOSE = 0x8
    PING = 0x9
    PONG = 0xA


# -- client frames -----------------------------------------------------------------------------


def mask_payload(payload: bytes, key: bytes) -> bytes:
    """XOR with a 4-byte key, one translate table per key byte (independent of the package's `unmask`)."""
    out = bytearray(len(payload))
    for i in range(4):
        table = bytes(b ^ key[i] for b in range(256))
        out[i::4] = payload[i::4].translate(table)
    return bytes(out)


def client_header(
    opcode: int,
    length: int,
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bytes | None = MASK,
    width: int | None = None,
) -> bytes:
    """A client frame header; `rsv` is the bits as they stand in the first byte (0x40 is RSV1),
    `width` forces the 7/16/64-bit length form, `mask=None` leaves it unmasked."""
    first = (0x80 if fin else 0) | rsv | opcode
    mask_bit = 0x80 if mask is not None else 0
    if width is None:
        width = 7 if length < 126 else 16 if length < 0x10000 else 64
    if width == 7:
        head = bytes((first, mask_bit | length))
    elif width == 16:
        head = bytes((first, mask_bit | 126)) + struct.pack("!H", length)
    else:
        head = bytes((first, mask_bit | 127)) + struct.pack("!Q", length)
    return head + (mask or b"")


def client_frame(
    opcode: int, payload: bytes = b"", *, fin: bool = True, rsv: int = 0, mask: bytes | None = MASK
) -> bytes:
    """A whole client frame with the shortest length form, masked with `mask` unless it is None."""
    body = mask_payload(payload, mask) if mask is not None else payload
    return client_header(opcode, len(payload), fin=fin, rsv=rsv, mask=mask) + body


def client_close(code: int | None = None, reason: bytes = b"") -> bytes:
    """A masked client close frame; `code=None` sends an empty payload."""
    return client_frame(Op.CLOSE, b"" if code is None else struct.pack("!H", code) + reason)


# -- server frames -----------------------------------------------------------------------------


def read_server_frame(read: Callable[[int], bytes]) -> tuple[bool, int, bytes]:
    """One server frame, (fin, opcode, payload), taken through `read(n)`; asserts it is unmasked,
    without reserved bits, in the shortest length form and complete."""

    def take(size: int) -> bytes:
        data = read(size)
        assert len(data) == size, "truncated frame"
        return data

    first, second = take(2)
    assert first & 0x70 == 0, "reserved bits set"
    assert second & 0x80 == 0, "server frames must not be masked"
    length = second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", take(2))
        assert length >= 126, "16-bit length used for a short payload"
    elif length == 127:
        (length,) = struct.unpack("!Q", take(8))
        assert length >= 0x10000, "64-bit length used for a payload that fits 16 bits"
    return bool(first & 0x80), first & 0x0F, take(length)


def decode_server_frames(data: bytes) -> list[tuple[bool, int, bytes]]:
    """Every (fin, opcode, payload) in server bytes, each checked as `read_server_frame` does."""
    stream = io.BytesIO(data)
    frames = []
    while stream.tell() < len(data):
        frames.append(read_server_frame(stream.read))
    return frames
