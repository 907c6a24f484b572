"""One app's connection as the bridge sees it: token, register, results and pings (ClientMCP v1 §3).

`AppChannel` is the app's WebSocket, and what its messages mean. It holds what the
bridge knows of the app on this connection (client ID, latest tool set, calls in flight)
and leaves everything that spans connections to the `Bridge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from msgspec import UNSET

from clientmcp_fast.core.apps import NO_CALLS
from clientmcp_fast.core.consent import NOT_ASKING
from clientmcp_fast.core.messages import (
    BRIDGE_TYPES,
    REGISTERED,
    authorize_message,
    decode_app_message,
    decode_progress,
    decode_register_extensions,
    loose_app_message,
)
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.progress import ProgressError, parse_report
from clientmcp_fast.core.register import RegisterError, ToolSet, json_boolean, parse_register
from clientmcp_fast.core.tokens import ROLE_CLIENT, TokenError
from clientmcp_fast.core.websocket import (
    HandshakeError,
    Link,
    WebSocket,
    accept_response,
    check_upgrade,
    offered_subprotocols,
)
from clientmcp_fast.speedups import PONG_FRAME, SHAPE_BAD, json_member, result_shape

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge
    from clientmcp_fast.core.calls import Call


SUBPROTOCOL = "clientmcp.v1"


def client_channel_handshake(headers: dict[bytes, bytes]) -> tuple[bytes, str | None]:
    """The 101 response to an app's upgrade, and the token it offers (ClientMCP v1 §3.1).

    The token is the offered value that does not begin with `clientmcp.`; None when
    there is none or more than one, which `AppChannel.open` turns into 4401.
    """
    key = check_upgrade(headers)
    offered = offered_subprotocols(headers)
    if SUBPROTOCOL not in offered:
        raise HandshakeError(400, "offer the clientmcp.v1 subprotocol (and the token as a second one)")
    tokens = [value for value in offered if not value.startswith("clientmcp.")]
    return accept_response(key, SUBPROTOCOL), tokens[0] if len(tokens) == 1 else None


def _shape_problem(error: msgspec.ValidationError) -> str:
    # AppMessage declares only `type` strictly, so these are the only shapes that fail.
    text = str(error)
    if "missing required field" in text:
        return "message has no type"
    if "$.type" in text:
        return "message type must be a string"
    return "message is not a JSON object"


class AppChannel(WebSocket):
    """The client channel of one connected app: its WebSocket, which ClientMCP messages run on."""

    __slots__ = ("bridge", "client_id", "toolset", "calls", "last_seen", "congested_since")

    def __init__(self, bridge: Bridge, link: Link, now: float) -> None:
        WebSocket.__init__(self, link)
        self.bridge = bridge
        self.client_id: str | None = None
        self.toolset: ToolSet | None = None  # None until the first register on this connection
        self.calls: dict[str, Call] = NO_CALLS  # its own at its first call (core/apps.py)
        self.last_seen = now
        self.congested_since: float | None = None
        bridge.app_connections += 1
        bridge.counters.app_connections_opened += 1

    # -- lifecycle, driven by the I/O layer -------------------------------------------------

    def open(self, token: str | None, now: float) -> None:
        """The handshake is done: check the offered token and take the client ID (ClientMCP v1 §3.1)."""
        bridge = self.bridge
        self.last_seen = now
        if bridge.shutting_down:
            self.send_close(1001, "bridge shutting down")
            return
        if bridge.app_connections > bridge.max_app_connections:
            self.send_close(4429, "too many app connections on this bridge")
            return
        if token is None:
            self.send_close(4401, "no token offered: send it as the second subprotocol")
            return
        try:
            client_id = bridge.verifier.verify(token, ROLE_CLIENT, now, remember=False)
        except TokenError as error:
            bridge.events.app_refused(str(error))
            self.send_close(4401, str(error))
            return
        self.client_id = client_id
        bridge.events.app_connected(client_id)
        bridge.attach(self, now)

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the app; anything received counts as a sign of life (docs/protocol.md, Close codes: 4408)."""
        # Also the `now` of whatever these bytes end: a call they answer, the connection they close.
        self.last_seen = now
        self.receive_bytes(data)

    def connection_lost(self, now: float) -> None:
        """The transport is gone, for whatever reason."""
        self.last_seen = now  # when its calls fail
        self.transport_lost()
        self.bridge.app_connections -= 1

    def congested(self, now: float) -> None:
        """Unsent data to the app rose above the soft limit: new calls are refused as busy."""
        if self.congested_since is None:
            self.congested_since = now

    def drained(self) -> None:
        """Unsent data fell back below the soft limit."""
        self.congested_since = None

    def overflowed(self, now: float) -> None:
        """Unsent data passed the hard limit: the app does not read."""
        self.close(4429, "the app does not read: unsent data passed the hard limit", now)

    # -- the bridge's App (core/apps.py) ----------------------------------------------------

    def send(self, message: bytes) -> None:
        """A `call` or `cancel` for the app, as one text message."""
        self.send_text(message)

    def close(self, code: int, reason: str, now: float) -> None:
        """Close the connection with a close code; its calls fail at once (ClientMCP v1 §5.3)."""
        self.last_seen = now  # when its calls fail
        self.send_close(code, reason)

    def call_ended(self, call: Call, outcome: int) -> None:
        """Nothing to tell: a call to an app connected here is counted by the bridge alone."""

    def unregistered_text(self) -> str:
        """The tool error for a call before the app's first register."""
        return Outcome.NOT_REGISTERED.text

    def ask_consent(self, request_id: str, client_name: str | None, client_uri: str, code: str) -> str | None:
        """Send `authorize` if the app declared `consent` in its latest register (docs/oauth.md)."""
        toolset = self.toolset
        if toolset is None or not toolset.consent:
            return NOT_ASKING
        self.send_text(authorize_message(request_id, client_name, client_uri, code))
        return None

    # -- what its WebSocket hears -----------------------------------------------------------

    def on_exact_ping(self) -> None:
        self.send_frame(PONG_FRAME)

    def on_binary(self, payload: bytes) -> None:
        self.send_close(4400, "binary messages are not part of the protocol: send JSON text")

    def on_close(self, code: int, reason: str) -> None:
        bridge = self.bridge
        bridge.counters.closed(code)
        if self.client_id is not None:
            bridge.events.app_closed(self.client_id, code, reason)
            bridge.detach(self, self.last_seen)

    def on_text(self, payload: bytes) -> None:
        try:
            try:
                message = decode_app_message(payload)
            except msgspec.ValidationError:
                message = loose_app_message(payload)  # an id that is not a string, say
        except msgspec.ValidationError as error:
            self.send_close(4400, _shape_problem(error))
            return
        except msgspec.DecodeError:
            self.send_close(4400, "message is not valid JSON")
            return
        except RecursionError:
            # msgspec refuses very deep nesting this way; it is the app's mistake, not ours.
            self.send_close(4400, "message nests too deeply")
            return
        kind = message.type
        if kind == "result":
            self._on_result(message)
        elif kind == "register":
            self._on_register(message, payload)
        elif kind == "ping":
            self.send_frame(PONG_FRAME)
        elif kind == "progress":
            self._on_progress(payload)
        elif kind == "consent":
            self._on_consent(message)
        elif kind in BRIDGE_TYPES:
            self.send_close(4400, f"{kind} is sent by the bridge, never by an app")
        # Any other type is ignored, for forward compatibility (ClientMCP v1 §3.2).

    def _on_result(self, message) -> None:
        call_id = message.id
        if not isinstance(call_id, str):
            self.send_close(4400, "result: id must be the call's id, a string")
            return
        result = message.result
        if result is UNSET:
            self.send_close(4400, "result: result is missing")
            return
        shape = result_shape(result)
        if shape == SHAPE_BAD:
            self.send_close(4400, "result: result must be an object with a content array")
            return
        call = self.calls.pop(call_id, None)
        if call is not None:
            # Unknown and finished ids are ignored, so cancel/result races are harmless.
            self.bridge.complete(call, result, shape, self.last_seen)

    def _on_register(self, message, payload: bytes) -> None:
        # The whole message was read as JSON already: this second reading cannot fail.
        extensions = decode_register_extensions(payload)
        try:
            toolset = parse_register(
                message.tools,
                message.instructions,
                self.bridge.limits.max_tools,
                message.consent,
                extensions.progress,
                extensions.trace,
            )
        except RegisterError as error:
            self.bridge.counters.registers_refused += 1
            self.bridge.events.register_refused(self.client_id, str(error))
            self.send_close(4400, str(error))
            return
        self.bridge.counters.registers_accepted += 1
        self.bridge.registered(self, toolset)
        self.send_text(REGISTERED)

    def _on_progress(self, payload: bytes) -> None:
        toolset = self.toolset
        if toolset is None or not toolset.progress:
            return  # not declared: an unknown type to this app's bridge, as to a v1 bridge
        message = decode_progress(payload)  # read as JSON already: it cannot fail
        call_id = json_member(message.id)
        if not isinstance(call_id, str):
            self.send_close(4400, "progress: id must be the call's id, a string")
            return
        try:
            report = parse_report(message.progress, message.total, message.message)
        except ProgressError as error:
            self.send_close(4400, str(error))
            return
        call = self.calls.get(call_id)
        if call is not None:
            # Unknown and finished ids are ignored, as a late result is.
            self.bridge.progress(call, report, self.last_seen)

    def _on_consent(self, message) -> None:
        request_id = message.id
        if not isinstance(request_id, str):
            self.send_close(4400, "consent: id must be the authorize message's id, a string")
            return
        allow = message.allow
        if allow is UNSET or json_boolean(allow) is None:
            self.send_close(4400, "consent: allow must be true or false")
            return
        # An unknown or ended id is ignored, as a late result is.
        self.bridge.consents.answered(self, request_id, json_boolean(allow), self.last_seen)
