"""The HTTP request reader (`speedups.RequestReader`): any bytes, in any reads, and the head and body limits.

A failure is an exception out of `feed`, a state that is not what `feed` returned, a
request read after the reader stopped, a body over 4 MiB, a refusal of another status,
an upgrade that is not a WebSocket's; with the compiled twin live, any disagreement
with the pure twin on the same reads.
"""

from __future__ import annotations

from collections import deque

from clientmcp_fast import speedups
from clientmcp_fast._pure import http_reader as pure
from clientmcp_fast.core.http import Request
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES

from .chunks import FILL, FILL_READS, split

# Bit 0x10 of the flags is unused (it once served an echo route that is no more).
HEAD_LIMITS = (16 * 1024, 4096, 1024, 64)  # by bits 0x60: the limit is a setting
# What FILL adds: one chunk of 64 KiB of a chunked body, or 64 KiB more of any other body.
FILL_READ = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
REFUSALS = {400, 431, 501, 505}


def _state(reader) -> int:
    """The bits `feed` must return, from the reader's attributes."""
    return (
        pure.READING_HEAD * reader.in_head
        | pure.READING_BODY * reader.in_body
        | pure.EXPECTS_CONTINUE * reader.expect_continue
        | pure.STOPPED * reader.stopped
        | pure.REFUSED * (reader.refusal is not None)
    )


def read(reader_class, flags: int, reads: list[bytes]) -> tuple:
    """Feed the reads to a new reader, checking it on the way; what it read, comparable between twins."""
    queue: deque = deque()
    if flags == FILL:
        flags, reads = 0, [*reads, *[FILL_READ] * FILL_READS]
    reader = reader_class(queue, Request, HEAD_LIMITS[flags >> 5 & 3], MAX_MESSAGE_BYTES)
    returned = []
    for data in reads:
        stopped, count = reader.stopped, len(queue)
        state = reader.feed(data)
        assert state == _state(reader), (state, _state(reader))
        assert not stopped or len(queue) == count, "a request was read after the reader stopped"
        returned.append(state)
        if stopped:
            break  # nothing more is read: the reads that FILL added would only cost time
    requests = []
    for request in queue:
        body = request.body
        assert body is None or len(body) <= MAX_MESSAGE_BYTES, "a body over 4 MiB"
        assert body is not None or (request is queue[-1] and reader.stopped), "413 that was not the last"
        assert request.method and all(name == name.lower() for name in request.headers)
        assert set(request.repeated) <= set(request.headers)
        requests.append(
            (request.method, request.target, request.headers, set(request.repeated), body)
            + (request.keep_alive, request.http11, request.known, request.others)
        )
    if reader.refusal is not None:
        status, text = reader.refusal
        assert status in REFUSALS and isinstance(text, str) and reader.stopped
    upgrade = None
    if reader.upgrade is not None:
        request, tail = reader.upgrade
        assert request.method == b"GET" and reader.stopped and reader.refusal is None
        kind, _ = speedups.route(request.target)
        assert kind == speedups.ROUTE_CONNECT, "an upgrade accepted off /connect"
        upgrade = (request.target, tail)
    state = (reader.in_head, reader.in_body, reader.expect_continue, reader.stopped, reader.refusal)
    return requests, upgrade, state, returned


def TestOneInput(data: bytes) -> None:
    flags, reads = split(data)
    live = read(speedups.RequestReader, flags, reads)
    if speedups.IMPLEMENTATION == "compiled":
        assert read(pure.RequestReader, flags, reads) == live, "the twins disagree"
