"""How a target's input says where a byte stream is cut: the reads a connection gets are arbitrary.

The first byte's low 4 bits are a count k of the bytes after it that give the first k
reads' lengths (1-256); the rest of the stream is the last read. Its high 4 bits are the
target's options, but for `FILL`: then the target follows the reads with `FILL_READS`
reads of 64 KiB of its own, to reach past the 4 MiB limit that a short input cannot
(one input in sixteen, as each costs milliseconds).
"""

from __future__ import annotations

FILL = 0xF0
FILL_READS = 65  # x 64 KiB: past 4 MiB + 1 KiB (core/limits.py)


def split(data: bytes) -> tuple[int, list[bytes]]:
    """The option bits (the first byte & 0xF0) and the stream cut into reads."""
    if not data:
        return 0, []
    flags, count = data[0] & 0xF0, data[0] & 0x0F
    lengths, stream = data[1 : 1 + count], data[1 + count :]
    reads = []
    for length in lengths:
        if not stream:
            break
        reads.append(stream[: length + 1])
        stream = stream[length + 1 :]
    if stream:
        reads.append(stream)
    return flags, reads


def encode(flags: int, reads: list[bytes]) -> bytes:
    """The input that `split` cuts into these reads (each but the last 1-256 bytes, at most 16 reads)."""
    assert len(reads) <= 16 and all(1 <= len(r) <= 256 for r in reads[:-1])
    counts = bytes((flags | max(0, len(reads) - 1),))
    return counts + bytes(len(r) - 1 for r in reads[:-1]) + b"".join(reads)
