"""The WebSocket frame parser and `core.websocket.WebSocket`: any client bytes, in any reads.

A failure is an exception out of `receive_bytes`, a server frame that is malformed or
written after the transport was ended, a second close, a close code that is neither one
of ours (1002, 1007, 1009) nor the peer's own, a text message that is not UTF-8, a
message over 4 MiB; with the compiled twin live, any disagreement between the twins'
`FrameReader`s on the same reads.
"""

from __future__ import annotations

from fakes import RecordingLink
from wire import Op, client_frame

from clientmcp_fast import speedups
from clientmcp_fast._pure import frames as pure
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.websocket import _VALID_PEER_CLOSE_CODES, Link, WebSocket

from .chunks import FILL, FILL_READS, split

ECHO = 0x10  # each text message is sent back, as the echo endpoint does
# What FILL adds: 64 KiB more of a fragmented message (unmasked by a mask of zeros).
FILL_READ = client_frame(Op.CONTINUATION, b"a" * 0x10000, fin=False, mask=b"\0\0\0\0")
OUR_CODES = {1002, 1007, 1009}


def peer_code(code: int) -> bool:
    """Whether a peer may close with `code` (RFC 6455 §7.4): the bridge then echoes it."""
    return code in _VALID_PEER_CLOSE_CODES or 3000 <= code <= 4999


class Recorder(WebSocket):
    """The WebSocket under test: keeps what its handler methods are given, and echoes text when asked."""

    def __init__(self, link: Link, echo: bool) -> None:
        WebSocket.__init__(self, link)
        self.echo = echo
        self.texts: list[bytes] = []
        self.binaries: list[bytes] = []
        self.closes: list[tuple[int, str]] = []

    def on_text(self, payload: bytes) -> None:
        self.texts.append(payload)
        if self.echo:
            self.send_text(payload)

    def on_binary(self, payload: bytes) -> None:
        self.binaries.append(payload)

    def on_exact_ping(self) -> None:
        self.texts.append(pure.EXACT_PING)
        self.send_frame(pure.PONG_FRAME)

    def on_close(self, code: int, reason: str) -> None:
        self.closes.append((code, reason))


def _frames(reader_class, reads: list[bytes]) -> list:
    """What a `FrameReader` makes of the reads, up to its first error."""
    reader = reader_class(MAX_MESSAGE_BYTES)
    out = []
    for data in reads:
        try:
            out.append(reader.feed(data))
        except speedups.FrameError as error:
            out.append((error.code, error.reason, error.frames))
            break
    return out


def TestOneInput(data: bytes) -> None:
    flags, reads = split(data)
    if flags == FILL:
        flags, reads = 0, [*reads, *[FILL_READ] * FILL_READS]
    link = RecordingLink()
    ws = Recorder(link, bool(flags & ECHO))
    for piece in reads:
        ws.receive_bytes(piece)
    ws.transport_lost()
    assert len(ws.closes) == 1, ws.closes
    code, _ = ws.closes[0]
    # 1005: the peer's close had no code; 1006: the transport ended without a close.
    assert code in OUR_CODES or peer_code(code) or code in (1005, 1006), code
    assert not link.written_after_end, "a write after the transport was ended"
    closed = link.close()  # every server frame parses; at most one close, of at most 125 bytes
    if closed is not None:
        assert closed[0] in OUR_CODES or peer_code(closed[0]), closed
    for text in ws.texts:
        text.decode("utf-8")  # raises if it is not UTF-8
    assert all(len(m) <= MAX_MESSAGE_BYTES for m in ws.texts + ws.binaries)
    if speedups.IMPLEMENTATION == "compiled":
        assert _frames(pure.FrameReader, reads) == _frames(speedups.FrameReader, reads), "the twins disagree"
