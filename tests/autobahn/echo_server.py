"""A bridge whose /connect echoes every message, for the Autobahn TestSuite: test code, not the product's.

`EchoServer` is the real `Server`, with its two WebSocket seams replaced: the handshake asks
for no subprotocol or token, and each accepted connection runs `EchoSession` instead of an
app's channel, on the same frame reader, WebSocket state machine and transport code.
"""

from __future__ import annotations

from clientmcp_fast.core.websocket import Link, WebSocket, accept_response, check_upgrade
from clientmcp_fast.net.server import Server
from clientmcp_fast.net.websocket import WebSocketProtocol
from clientmcp_fast.speedups import EXACT_PING, OP_BINARY, build_frame


class EchoServer(Server):
    """The bridge's server, echoing on /connect."""

    def handshake(self, headers: dict[bytes, bytes]) -> tuple[bytes, str | None]:
        return accept_response(check_upgrade(headers), None), None

    def new_session(self, protocol: WebSocketProtocol) -> EchoSession:  # type: ignore[override]
        return EchoSession(protocol)


class EchoSession(WebSocket):
    """Sends every message back as it came; the same WebSocket code the client channel runs on."""

    __slots__ = ()

    def __init__(self, link: Link) -> None:
        WebSocket.__init__(self, link)

    def open(self, token: str | None, now: float) -> None:
        pass

    def receive_data(self, data: bytes, now: float) -> None:
        self.receive_bytes(data)

    def connection_lost(self, now: float) -> None:
        self.transport_lost()

    def congested(self, now: float) -> None:
        pass

    def drained(self) -> None:
        pass

    def overflowed(self, now: float) -> None:
        self.send_close(1008, "not reading")

    def on_text(self, payload: bytes) -> None:
        self.send_text(payload)

    def on_exact_ping(self) -> None:
        self.send_text(EXACT_PING)

    def on_binary(self, payload: bytes) -> None:
        self.send_frame(build_frame(OP_BINARY, payload))

    def on_close(self, code: int, reason: str) -> None:
        pass
