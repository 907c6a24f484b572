"""Recording fakes for the sans-I/O core: a link that parses the frames it gets, waiters, streams,
exchanges, an event log, and requests made from a dict of headers.

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
from clientmcp_fast.core.events import EventLog
from clientmcp_fast.core.http import KNOWN_INDEX, KNOWN_NAMES, Exchange, Request
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.core.tokens import TokenVerifier, mint
from clientmcp_fast.core.websocket import OPEN, Link

SECRET = b"core-tests-secret-0123456789abcdef-0123"
NOW = 1_700_000_000.0


def client_text(message: Any) -> bytes:
    """A masked text frame: bytes and str are sent as they are, anything else as compact JSON."""
    if isinstance(message, bytes):
        payload = message
    elif isinstance(message, str):
        payload = message.encode("utf-8")
    else:
        payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return client_frame(Op.TEXT, payload)


def request_with_headers(
    method: bytes,
    target: bytes,
    headers: dict[bytes, bytes],
    repeated: frozenset[bytes] | tuple[()] = (),
    body: bytes | None = b"",
    keep_alive: bool = True,
    http11: bool = True,
) -> Request:
    """A request made from a dict of lower-cased header names, as the request reader would have made it."""
    known: list[bytes | None] = [None] * len(KNOWN_NAMES)
    others: dict[bytes, bytes] = {}
    for name, value in headers.items():
        index = KNOWN_INDEX.get(name)
        if index is None:
            others[name] = value
        else:
            known[index] = value
    return Request(method, target, known, others or None, repeated, body, keep_alive, http11)


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

    def call_progress(self, report) -> None:
        self.events.append(("progress", report.progress, report.total, report.message))


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


class RecordingEvents(EventLog):
    """The event log port (core/events.py), keeping what it is told, in order: (event, its arguments...)."""

    def __init__(self) -> None:
        self.told: list[tuple] = []

    def named(self, event: str) -> list[tuple]:
        """The arguments of each `event` told, in order."""
        return [told[1:] for told in self.told if told[0] == event]

    def call_ended(self, call, outcome, seconds):
        self.told.append(("call_ended", call, outcome, seconds))

    def app_connected(self, client_id):
        self.told.append(("app_connected", client_id))

    def app_closed(self, client_id, code, reason):
        self.told.append(("app_closed", client_id, code, reason))

    def app_refused(self, reason):
        self.told.append(("app_refused", reason))

    def register_refused(self, client_id, reason):
        self.told.append(("register_refused", client_id, reason))

    def agent_refused(self, reason, client_id, now):
        self.told.append(("agent_refused", reason, client_id, now))

    def agent_unauthorized(self, problem):
        self.told.append(("agent_unauthorized", problem))

    def cluster_message_too_large(self, client_id, limit):
        self.told.append(("cluster_message_too_large", client_id, limit))

    def cluster_message_dropped(self, reason, detail):
        self.told.append(("cluster_message_dropped", reason, detail))

    def cluster_wire_mismatch(self, instance, version, ours):
        self.told.append(("cluster_wire_mismatch", instance, version, ours))

    def cluster_apps_not_kept(self, max_kept):
        self.told.append(("cluster_apps_not_kept", max_kept))

    def cluster_stalled(self, seconds):
        self.told.append(("cluster_stalled", seconds))


class SessionIds:
    """The bridge's `new_session_id`: 32 hex digits, as the server's, counting from 1 (never random)."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self) -> bytes:
        self.made += 1
        return b"%032x" % self.made


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
    *,
    wake: RecordingWake | None = None,
    max_app_connections: int | None = None,
    events: EventLog | None = None,
    **limits: Any,
) -> Bridge:
    """A bridge verifying the core tests' secret, with some limits changed; it logs nothing unless given `events`."""
    return Bridge(
        Limits(**limits),
        TokenVerifier([SECRET]),
        wake or RecordingWake(),
        max_app_connections,
        new_session_id=SessionIds(),
        events=events,
    )


def is_open(app: AppChannel) -> bool:
    """Whether the app's connection is open: neither side has begun to close it."""
    return app.state == OPEN


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
