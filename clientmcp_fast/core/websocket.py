"""The server side of RFC 6455, without I/O: the opening handshake, and a connection's frames.

`WebSocket.receive_bytes()` takes bytes from the peer and calls its subclass's handler methods
with whole messages; what must go back to the peer goes to its link (see `Link`). A peer's
mistake never raises out of here: it becomes a close code (1002, 1007, 1009) whose
reason is ours, never the text of an exception.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib

from clientmcp_fast.core.limits import MAX_CLOSE_REASON_BYTES, MAX_MESSAGE_BYTES
from clientmcp_fast.speedups import (
    OP_CLOSE,
    OP_CONTINUATION,
    OP_EXACT_PING,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    FrameError,
    build_close,
    build_frame,
    frames,
)

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# RFC 6455 §7.4: codes a peer may send in a close frame. 1004-1006 and 1015 are reserved
# for local use; 1012-1014 are registered with IANA since.
_VALID_PEER_CLOSE_CODES = frozenset((1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014))

OPEN, CLOSING, CLOSED = 0, 1, 2


def valid_utf8(data: bytes) -> bool:
    """Whether `data` is valid UTF-8, as a text frame's payload must be (RFC 6455 §5.6)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class HandshakeError(Exception):
    """An upgrade request that cannot be accepted: answer with `status` and `reason`."""

    def __init__(self, status: int, reason: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(status, reason)
        self.status = status
        self.reason = reason
        self.headers = headers


def _tokens(value: bytes) -> list[bytes]:
    return [part.strip().lower() for part in value.split(b",")]


def check_upgrade(headers: dict[bytes, bytes]) -> bytes:
    """The Sec-WebSocket-Key of a valid upgrade request (RFC 6455 §4.2.1), else `HandshakeError`."""
    if b"websocket" not in _tokens(headers.get(b"upgrade", b"")):
        raise HandshakeError(426, "this endpoint takes a WebSocket upgrade", ((b"upgrade", b"websocket"),))
    if b"upgrade" not in _tokens(headers.get(b"connection", b"")):
        raise HandshakeError(400, "Connection header must include Upgrade")
    if headers.get(b"sec-websocket-version", b"").strip() != b"13":
        raise HandshakeError(
            426, "only WebSocket version 13 is supported", ((b"sec-websocket-version", b"13"),)
        )
    key = headers.get(b"sec-websocket-key", b"").strip()
    try:
        valid_key = len(base64.b64decode(key, validate=True)) == 16
    except binascii.Error:
        valid_key = False
    if not valid_key:
        raise HandshakeError(400, "Sec-WebSocket-Key must be 16 bytes in base64")
    return key


def offered_subprotocols(headers: dict[bytes, bytes]) -> list[str]:
    """The subprotocols a client offers, in order (the header may be repeated or a list)."""
    raw = headers.get(b"sec-websocket-protocol", b"")
    return [part.strip().decode("latin-1") for part in raw.split(b",") if part.strip()]


def accept_response(key: bytes, subprotocol: str | None) -> bytes:
    """The 101 response completing a handshake; no extension is ever accepted."""
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
    head = (
        b"HTTP/1.1 101 Switching Protocols\r\n"
        b"Upgrade: websocket\r\n"
        b"Connection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n"
    )
    if subprotocol is not None:
        head += b"Sec-WebSocket-Protocol: " + subprotocol.encode("ascii") + b"\r\n"
    return head + b"\r\n"


def close_reason_bytes(reason: str) -> bytes:
    """`reason` as UTF-8 cut to what a close frame can carry, never inside a character."""
    data = reason.encode("utf-8")
    if len(data) <= MAX_CLOSE_REASON_BYTES:
        return data
    return data[:MAX_CLOSE_REASON_BYTES].decode("utf-8", "ignore").encode("utf-8")


class Link:
    """Where a connection's output goes; the I/O layer implements it, tests record it.

    A base class rather than a Protocol, so that compiled, the WebSocket calls these
    methods directly: the net layer's `WebSocketProtocol` and the tests' links derive from it.
    """

    __slots__ = ()

    def write(self, data: bytes) -> None:
        """Queue bytes for the peer (writes made in one loop iteration go out together)."""
        raise NotImplementedError

    def write_now(self, data: bytes) -> None:
        """Bytes that answer what just arrived (a pong): out at once, unless writes are queued (then after them)."""
        raise NotImplementedError

    def end(self, wait_for_peer: bool) -> None:
        """Close the transport once queued bytes are out; if asked, first give the peer a while to close."""
        raise NotImplementedError


class Fragments:
    """A fragmented message so far, only while one arrives: its bytes, and for text, their UTF-8 check."""

    __slots__ = ("data", "utf8")

    def __init__(self, text: bool) -> None:
        # One buffer, as a list of 2-byte fragments of a 4 MiB message would hold two million
        # objects, hundreds of megabytes.
        self.data = bytearray()
        self.utf8 = codecs.getincrementaldecoder("utf-8")() if text else None


# `frames.FrameReader`, not the name alone: compiled, `frames` is the compiled twin's module that
# websocket.pxd cimports, and a class compiled from this file may derive only from a class it
# declares; pure, the pure twin's.
class WebSocket(frames.FrameReader):
    """One accepted RFC 6455 connection: frames in, whole messages to its handler methods, frames out.

    A base class: a subclass (the app's channel, the echo session, a test's recorder) is told of
    what arrives by `on_text`, `on_binary`, `on_exact_ping` and `on_close`. The connection is one
    object with its frame reader and what is made of the messages, not three: each idle app
    holds one (docs/architecture.md, Cycles and memory).
    """

    __slots__ = ("_link", "_fragments", "state")

    def __init__(self, link: Link) -> None:
        frames.FrameReader.__init__(self, MAX_MESSAGE_BYTES)
        self._link = link
        self._fragments: Fragments | None = None
        self.state = OPEN

    # -- what a subclass is told ------------------------------------------------------------

    def on_text(self, payload: bytes) -> None:
        """A whole text message, valid UTF-8."""
        raise NotImplementedError

    def on_binary(self, payload: bytes) -> None:
        """A whole binary message."""
        raise NotImplementedError

    def on_exact_ping(self) -> None:
        """The exact text `{"type":"ping"}`, spotted before any JSON parsing."""
        raise NotImplementedError

    def on_close(self, code: int, reason: str) -> None:
        """The connection ended, with this close code and reason."""
        raise NotImplementedError

    # -- the connection ---------------------------------------------------------------------

    def receive_bytes(self, data: bytes) -> None:
        """Feed bytes from the peer; complete messages reach the handler methods in order."""
        if self.state == CLOSED:
            return
        try:
            frames = self.feed(data)
            failure = None
        except FrameError as error:
            # Frames that came before the error are delivered; then, as the byte stream cannot
            # be parsed further (nor a close frame from the peer read), the connection fails at
            # once (RFC 6455 §7.1.7).
            frames, failure = error.frames, error
        for opcode, fin, payload in frames:
            if self.state != OPEN:
                # RFC 6455 §5.5.1: after a close frame was sent, only the peer's close matters.
                if opcode == OP_CLOSE:
                    self._closed_by_peer_reply()
                    return
                continue
            if opcode == OP_TEXT and fin and self._fragments is None:
                if payload.isascii() or valid_utf8(payload):
                    self.on_text(payload)
                else:
                    self.send_close(1007, "text message is not valid UTF-8")
            elif opcode == OP_EXACT_PING and self._fragments is None:
                self.on_exact_ping()
            elif OP_CLOSE <= opcode <= OP_PONG:
                self._on_control(opcode, payload)
            else:
                self._on_fragment(opcode, fin, payload)
        if failure is not None:
            self._fail(failure.code, failure.reason)

    def _on_fragment(self, opcode: int, fin: int, payload: bytes) -> None:
        if opcode == OP_EXACT_PING:
            # The exact ping text, but inside a fragmented message: a framing error.
            opcode, payload = OP_TEXT, b'{"type":"ping"}'
        fragments = self._fragments
        if opcode == OP_CONTINUATION:
            if fragments is None:
                self.send_close(1002, "continuation frame without a message to continue")
                return
        elif fragments is not None:
            self.send_close(1002, "new message before the fragmented one ended")
            return
        else:
            fragments = self._fragments = Fragments(opcode == OP_TEXT)
        if len(fragments.data) + len(payload) > MAX_MESSAGE_BYTES:
            self.send_close(1009, "message larger than 4 MiB")
            return
        utf8 = fragments.utf8
        if utf8 is not None and not payload.isascii():
            # Fail fast on invalid UTF-8, as soon as a fragment proves it (RFC 6455 §8.1).
            try:
                utf8.decode(payload, False)
            except UnicodeDecodeError:
                self.send_close(1007, "text message is not valid UTF-8")
                return
        fragments.data += payload
        if not fin:
            return
        message = bytes(fragments.data)
        self._fragments = None
        if utf8 is not None:
            try:
                utf8.decode(b"", True)
            except UnicodeDecodeError:
                self.send_close(1007, "text message is not valid UTF-8")
                return
            self.on_text(message)
        else:
            self.on_binary(message)

    def _on_control(self, opcode: int, payload: bytes) -> None:
        if opcode == OP_PING:
            self._link.write(build_frame(OP_PONG, payload))
        elif opcode == OP_CLOSE:
            self._on_peer_close(payload)
        # OP_PONG: unsolicited pongs are allowed and mean nothing (RFC 6455 §5.5.3).

    def _on_peer_close(self, payload: bytes) -> None:
        # A malformed close is still the peer's close: no other will follow, so after ours
        # the server closes TCP at once (RFC 6455 §5.5.1) rather than wait for a reply.
        if not payload:
            code, reason = 1005, ""
        elif len(payload) == 1:
            self._fail(1002, "close frame with a 1-byte payload")
            return
        else:
            code = int.from_bytes(payload[:2], "big")
            if code not in _VALID_PEER_CLOSE_CODES and not 3000 <= code <= 4999:
                self._fail(1002, f"invalid close code {code}")
                return
            try:
                reason = payload[2:].decode("utf-8")
            except UnicodeDecodeError:
                self._fail(1007, "close reason is not valid UTF-8")
                return
        # Echo the close (RFC 6455 §5.5.1), then the server closes TCP first (§7.1.1).
        self._link.write(build_close(1000 if code == 1005 else code, b""))
        self.state = CLOSED
        self._link.end(False)
        self.on_close(code, reason)

    def _closed_by_peer_reply(self) -> None:
        self.state = CLOSED
        self._link.end(False)

    def send_text(self, payload: bytes) -> None:
        """Send one text message, unless the connection is closing."""
        if self.state == OPEN:
            self._link.write(build_frame(OP_TEXT, payload))

    def send_frame(self, frame: bytes) -> None:
        """Answer with a frame built in advance (the fixed pong), unless the connection is closing."""
        if self.state == OPEN:
            # A pong has nothing to be coalesced with: most pings arrive alone, each waking the
            # bridge for itself, and the pong then leaves without waiting for the end of the turn.
            self._link.write_now(frame)

    def send_close(self, code: int, reason: str) -> None:
        """Start the closing handshake with `code`; `on_close` hears of it at once."""
        if self.state != OPEN:
            return
        self.state = CLOSING
        self._fragments = None
        self._link.write(build_close(code, close_reason_bytes(reason)))
        self._link.end(True)
        self.on_close(code, reason)

    def _fail(self, code: int, reason: str) -> None:
        if self.state == OPEN:
            self.state = CLOSED
            self._link.write(build_close(code, close_reason_bytes(reason)))
            self._link.end(False)
            self.on_close(code, reason)
        elif self.state == CLOSING:
            self.state = CLOSED
            self._link.end(False)

    def transport_lost(self) -> None:
        """The transport ended; if the connection had not closed yet, `on_close` hears 1006."""
        if self.state == OPEN:
            self.state = CLOSED
            self.on_close(1006, "connection lost")
        self.state = CLOSED
