"""A WebSocket that echoes every message: only for the Autobahn TestSuite, never on by default."""

from __future__ import annotations

from clientmcp_fast.core.websocket import Link, MessageHandler, WebSocket
from clientmcp_fast.speedups import EXACT_PING, OP_BINARY, build_frame


class EchoSession(MessageHandler):
    """Sends every message back as it came; the same WebSocket code the client channel runs on."""

    __slots__ = ("ws",)

    def __init__(self, link: Link) -> None:
        self.ws = WebSocket(self, link)

    def open(self, token: str | None, now: float) -> None:
        pass

    def receive_data(self, data: bytes, now: float) -> None:
        self.ws.receive_data(data)

    def connection_lost(self) -> None:
        self.ws.connection_lost()

    def congested(self, now: float) -> None:
        pass

    def drained(self) -> None:
        pass

    def overflowed(self) -> None:
        self.ws.close(1008, "not reading")

    def on_text(self, payload: bytes) -> None:
        self.ws.send_text(payload)

    def on_exact_ping(self) -> None:
        self.ws.send_text(EXACT_PING)

    def on_binary(self, payload: bytes) -> None:
        self.ws.send_frame(build_frame(OP_BINARY, payload))

    def on_close(self, code: int, reason: str) -> None:
        pass
