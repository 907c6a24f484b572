"""Recording fakes for the sans-I/O core: a link that parses the frames it gets, waiters, streams, exchanges.

Frames are built and parsed by `tests/wire.py`, independently of the package's frame
code, so that the tests check the bytes on the wire rather than the package against itself.
"""

from __future__ import annotations

import json
from typing import Any

from wire import Op, client_frame, decode_server_frames

from clientmcp_fast.core.bridge import Bridge
from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.http import Exchange, Request
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.core.tokens import TokenVerifier, mint
from clientmcp_fast.core.websocket import OPEN, Link

SECRET = b"core-tests-secret-0123456789abcdef-0123"
NOW = 1_700_000_000.0


def is_open(channel: AppChannel) -> bool:
    """Whether the app's WebSocket is still open (neither closing nor closed)."""
    return channel.ws.state == OPEN


def client_text(message: Any) -> bytes:
    """A masked text frame: bytes and str are sent as they are, anything else as compact JSON."""
    if isinstance(message, bytes):
        payload = message
    elif isinstance(message, str):
        payload = message.encode("utf-8")
    else:
        payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return client_frame(Op.TEXT, payload)


class RecordingExchange(Exchange):
    """The Exchange port, keeping the answer."""

    __slots__ = ("answer",)

    def __init__(self, request: Request) -> None:
        self.request = request
        self.on_abandon = None
        self.answer: tuple[int, bytes] | None = None

    def respond(self, status: int, headers, body: bytes) -> None:
        self.answer = (status, body)


class RecordingLink(Link):
    """A `Link` that keeps every write, in order, and every request to end the transport."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.ends: list[bool] = []
        self.written_after_end = 0
        self._seen = 0

    def write(self, data: bytes) -> None:
        if self.ends:
            self.written_after_end += 1
        self.writes.append(bytes(data))

    # The order of writes is what the core decides; when they reach the socket is the net layer's.
    write_now = write

    def end(self, wait_for_peer: bool) -> None:
        self.ends.append(wait_for_peer)

    @property
    def data(self) -> bytes:
        """Every byte written so far."""
        return b"".join(self.writes)

    def frames(self) -> list[tuple[int, bytes]]:
        """Every frame written so far, as (opcode, payload); the core never fragments what it sends."""
        frames = decode_server_frames(self.data)
        assert all(fin for fin, _, _ in frames), "server frames are never fragmented here"
        return [(opcode, payload) for _, opcode, payload in frames]

    def new_frames(self) -> list[tuple[int, bytes]]:
        """The frames written since the last call of this method."""
        frames = self.frames()
        fresh = frames[self._seen :]
        self._seen = len(frames)
        return fresh

    def texts(self) -> list[bytes]:
        """The payloads of every text frame written so far."""
        return [payload for opcode, payload in self.frames() if opcode == Op.TEXT]

    def messages(self) -> list[Any]:
        """Every text frame written so far, decoded as JSON."""
        return [json.loads(payload) for payload in self.texts()]

    def close(self) -> tuple[int, str] | None:
        """The (code, reason) of the close frame written, or None; more than one is a bug."""
        closes = [payload for opcode, payload in self.frames() if opcode == Op.CLOSE]
        assert len(closes) <= 1, f"several close frames: {closes!r}"
        if not closes:
            return None
        payload = closes[0]
        assert len(payload) <= 125, "a control frame carries at most 125 bytes"
        return int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8")


class RecordingWaiter(Call):
    """A `Call` (core/calls.py) that records what it is told, in order."""

    __slots__ = ("events",)

    def __init__(self, wants_stream: bool = False) -> None:
        super().__init__(wants_stream)
        self.events: list[tuple] = []

    def call_result(self, result: bytes, has_result_type: bool) -> None:
        self.events.append(("result", bytes(result), has_result_type))

    def call_error(self, text: str) -> None:
        self.events.append(("error", text))

    def call_slow(self) -> None:
        self.events.append(("slow",))

    def call_tick(self) -> None:
        self.events.append(("tick",))


class RecordingStream:
    """A `NotificationStream` (core/bridge.py) that records what it is told, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def tools_changed(self) -> None:
        self.events.append("tools_changed")

    def keep_alive(self) -> None:
        self.events.append("keep_alive")

    def end(self) -> None:
        self.events.append("end")


class RecordingWake:
    """The bridge's `wake(when)` callback, recording every time it is asked for."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, when: float) -> None:
        self.times.append(when)


def token(client_id: str, role: str = "client", *, now: float = NOW, ttl: float = 3600) -> str:
    """A token signed with the core tests' secret."""
    return mint(SECRET, role, client_id, ttl, now)


def make_bridge(
    *, wake: RecordingWake | None = None, max_app_connections: int | None = None, **limits: Any
) -> Bridge:
    """A bridge verifying the core tests' secret, with some limits changed."""
    return Bridge(Limits(**limits), TokenVerifier([SECRET]), wake or RecordingWake(), max_app_connections)


def connect(
    bridge: Bridge, client_id: str | None = "app-1", *, now: float = NOW, offered: str | None = None
) -> tuple[AppChannel, RecordingLink]:
    """An app connection through the handshake: a valid client token for `client_id`, or `offered`."""
    link = RecordingLink()
    channel = AppChannel(bridge, link, now)
    channel.open(offered if client_id is None else token(client_id), now)
    return channel, link


def send(channel: AppChannel, message: Any, now: float = NOW) -> None:
    """Feed one masked text frame holding `message` to the channel."""
    channel.receive_data(client_text(message), now)


def tool(name: str, **extra: Any) -> dict:
    """A minimal valid tool declaration."""
    return {"name": name, "inputSchema": {"type": "object"}, **extra}


def register(channel: AppChannel, *tools: dict, now: float = NOW, **members: Any) -> None:
    """Send a register declaring `tools` (and any other members, such as instructions)."""
    send(channel, {"type": "register", "tools": list(tools), **members}, now)
