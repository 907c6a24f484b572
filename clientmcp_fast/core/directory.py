"""The app directory: which instance of a cluster holds each client ID's app, and the calls between them.

Sans-I/O like the rest of the core: a `Bus` port carries messages (tuples) to subjects and
the I/O side feeds what arrives to `Directory.receive`, with `now`; `on_timer(now)` sends
heartbeats and finds instances that stopped sending them. clientmcp_fast/net/nats.py runs
it on NATS; tests run it on an in-memory bus (docs/scaling.md).

An app held by another instance stands in the `Bridge`'s `apps` as a `RemoteApp`: it has what
the bridge and the agent endpoint read of an app (`toolset`, `calls`, `ws`, `congested_since`),
and its `ws.send_text` forwards the bridge's `call` and `cancel` to the instance holding the
app. So a tools/call, its timeout, streaming, cancellation and every outcome run through the
same `Bridge` code as a local call, and a single process (no directory) is unchanged.

Replacement (ClientMCP v1 §3.1) across instances: every connection gets an epoch from a
Lamport clock (one above every epoch this instance has seen); the connection with the
highest (epoch, instance ID) holds the client ID everywhere. A connection made after an
instance heard of another one's claim always has a higher epoch, so "newest" is the causal
order; two made concurrently on two instances are ordered by instance ID, the same way on
every instance, so exactly one survives and the others are closed with 4409.

Ordering (docs/scaling.md, Ordering): what an instance says of its apps travels on several
subjects, which the receiving side may apply in either order. So every STATE, GONE and SYNC
carries the sending instance's sequence number, and an older one never undoes a newer one: a
STATE older than the last applied for the same connection is dropped, a GONE ends its
connection for good (remembered for DEAD_AFTER seconds against a STATE delivered after it),
and whatever an instance sent before its latest SYNC is superseded by the states after it.

Upgrades (docs/scaling.md, Upgrades): instances of one WIRE_VERSION share a cluster whatever
their releases. A release may add fields at the end of a message: one from an older release
lacks them and is read with defaults that keep the older behaviour, and fields added by a newer
one are ignored, as is a kind of message this release does not know. Any other change raises
WIRE_VERSION, which every BEAT and SYNC announces: an instance of another version is ignored,
with one warning.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import msgspec

from clientmcp_fast.core import outcomes
from clientmcp_fast.core.agent_legacy import cancel_call
from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.counters import (
    BUSY,
    DISCONNECTED,
    NOT_REGISTERED,
    SHUTTING_DOWN,
    TIMEOUT,
    TOO_LARGE,
    UNKNOWN_TOOL,
)
from clientmcp_fast.core.counters import RESULT as ANSWERED
from clientmcp_fast.core.jsonrpc import encode_json
from clientmcp_fast.core.register import RegisterError, ToolSet, parse_register
from clientmcp_fast.log import logger
from clientmcp_fast.speedups import result_shape

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge

# docs/scaling.md, Failure detection: a heartbeat every second; an instance not heard from for
# three is taken as gone, so its apps' calls fail within DEAD_AFTER + BEAT_EVERY seconds.
BEAT_EVERY = 1.0
DEAD_AFTER = 3.0

# docs/scaling.md, Upgrades: raised by a change of the messages that an older release cannot
# read (a field removed, moved or meaning something else), never by a field added at the end.
WIRE_VERSION = 1

# Message kinds (the first element of every message tuple).
STATE = 1  # (STATE, client_id, epoch, instance, tools_json | None, instructions | None, seq)
GONE = 2  # (GONE, client_id, epoch, instance, seq)
APP = 3  # (APP, from_instance, client_id, epoch, message): a call or cancel for the app
RESULT = 4  # (RESULT, client_id, call_id, result, has_result_type)
ERROR = 5  # (ERROR, client_id, call_id, text, outcome): outcome as in core/counters.py
BEAT = 6  # (BEAT, instance, wire_version)
SYNC = 7  # (SYNC, instance, seq, wire_version): send me the state of your apps; forget what I sent before
CANCEL = 8  # (CANCEL, client_id, request_id, session | None, instance): a legacy notifications/cancelled

# docs/scaling.md, Upgrades: each kind's length as this release sends it, and in the oldest
# layout of WIRE_VERSION 1, from releases that announced no version; the fields between get
# defaults (`_fitted`).
_LENGTH = {STATE: 7, GONE: 5, APP: 5, RESULT: 5, ERROR: 5, BEAT: 3, SYNC: 4, CANCEL: 5}
_OLDEST_LENGTH = {STATE: 7, GONE: 5, APP: 5, RESULT: 5, ERROR: 4, BEAT: 2, SYNC: 3, CANCEL: 4}
# An ERROR of the oldest layout has no outcome: it is read from its tool error's text (core/outcomes.py).
_OUTCOME_OF_TEXT = {
    outcomes.DISCONNECTED: DISCONNECTED,
    outcomes.NOT_REGISTERED: NOT_REGISTERED,
    outcomes.BUSY: BUSY,
    outcomes.SHUTTING_DOWN: SHUTTING_DOWN,
    outcomes.TOO_LARGE: TOO_LARGE,
}
_OUTCOME_OF_PREFIX = (
    ("Unknown tool: ", UNKNOWN_TOOL),
    (outcomes.too_large_between_instances(0).partition("(over")[0], TOO_LARGE),
    (outcomes.timed_out(1).partition(" within")[0], TIMEOUT),
)

# The other side checked the register against its own limit already.
_ANY_NUMBER = 1 << 30


class Bus(Protocol):
    """How the directory reaches the other instances (the NATS adapter; an in-memory one in tests)."""

    def send(self, subject: str, message: tuple) -> None:
        """Send one message to a subject; the bus may batch what is sent in one loop turn."""


def _outcome_of(text: object) -> int:
    """The outcome of an ERROR from a release that did not send it, read from its tool error's text."""
    if not isinstance(text, str):
        return DISCONNECTED
    for prefix, outcome in _OUTCOME_OF_PREFIX:
        if text.startswith(prefix):
            return outcome
    return _OUTCOME_OF_TEXT.get(text, DISCONNECTED)


def subject_id(client_id: str) -> str:
    """A client ID as one subject token: hex of its UTF-8, so no ID is another's or holds `.`, `*`, `>`."""
    return client_id.encode().hex()


class _Forwarded(msgspec.Struct, gc=False):
    """A `call` or `cancel` the bridge wrote for a remote app, read back on the app's instance."""

    type: str
    id: str
    name: str | msgspec.UnsetType = msgspec.UNSET
    arguments: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_decode_forwarded = msgspec.json.Decoder(_Forwarded).decode


class RemoteApp:
    """An app connected to another instance, as the bridge and the agent endpoint see it."""

    __slots__ = (
        "directory",
        "client_id",
        "instance",
        "epoch",
        "toolset",
        "calls",
        "congested_since",
        "last_seen",
        "seq",
        "kept",
        "over_bound",
        "subject",
    )

    def __init__(self, directory: Directory, client_id: str, instance: str, epoch: int, seq: int = 0) -> None:
        self.directory = directory
        self.subject = directory.instance_subject(instance)  # where its calls go, made once
        self.client_id = client_id
        self.instance = instance
        self.epoch = epoch
        self.toolset: ToolSet | None = None
        self.calls: dict[str, Call] = {}
        self.congested_since = None  # the app's own instance answers busy
        self.last_seen = math.inf  # its own instance closes it when idle
        self.seq = seq  # of the latest STATE applied (docs/scaling.md, Ordering)
        # docs/scaling.md, Apps held elsewhere: its tool set counts against the bound; or, the
        # bound was reached, so its tools are not kept here (agents get TOOLS_NOT_KEPT).
        self.kept = False
        self.over_bound = False

    @property
    def ws(self) -> RemoteApp:
        return self  # `app.ws.send_text(...)` forwards

    @property
    def is_open(self) -> bool:
        return True

    def send_text(self, message: bytes) -> None:
        """A `call` or `cancel` the bridge wrote for this app: to its instance."""
        directory = self.directory
        directory.bus.send(self.subject, (APP, directory.instance, self.client_id, self.epoch, message))

    def close(self, code: int, reason: str) -> None:
        """Replaced (or the bridge ends): its calls fail now; the connection is closed where it is."""
        bridge = self.directory.bridge
        if bridge.apps.get(self.client_id) is not self:
            self.directory.release(self)
            bridge.detach(self)


class ForwardedCall(Call):
    """A call an agent made on another instance, run here on the local app; its end goes back."""

    __slots__ = ("directory", "origin", "origin_id", "client_id", "outcome")

    # The agent's instance, which owns the call, writes its log line; here it is counted in
    # the cluster's metrics only (docs/operations.md, Log events).
    log_line = False

    def __init__(self, directory: Directory, origin: str, origin_id: str, client_id: str) -> None:
        self.init_call(False)  # the agent's instance streams, not this one
        self.directory = directory
        self.origin = origin
        self.origin_id = origin_id
        self.client_id = client_id
        self.outcome = ANSWERED  # how it ended, set before `call_error` (Directory.call_ended)

    def _reply(self, message: tuple) -> None:
        directory = self.directory
        directory.forwarded.pop((self.origin, self.origin_id), None)
        directory.bus.send(directory.instance_subject(self.origin), message)

    def call_result(self, result: bytes, has_result_type: bool) -> None:
        self._reply((RESULT, self.client_id, self.origin_id, bytes(result), has_result_type))

    def call_error(self, text: str) -> None:
        self._reply((ERROR, self.client_id, self.origin_id, text, self.outcome))

    def call_slow(self) -> None:  # pragma: no cover - never wants a stream
        pass

    def call_tick(self) -> None:  # pragma: no cover
        pass


class Directory:
    """This instance's view of the cluster: whose app is where, and the calls crossing instances."""

    def __init__(self, bridge: Bridge, bus: Bus, instance: str, prefix: str = "clientmcp") -> None:
        self.bridge = bridge
        self.bus = bus
        self.instance = instance
        self.prefix = prefix
        self.clock = 0  # the Lamport clock of connection epochs
        self.claims: dict[str, tuple[int, str]] = {}  # client ID -> (epoch, instance) holding it
        self.local: dict[str, tuple[object, int]] = {}  # client ID -> (AppChannel, epoch) held here
        self.forwarded: dict[tuple[str, str], ForwardedCall] = {}
        self.peers: dict[str, float] = {}  # instance -> when last heard from
        # Instances taken as gone for their silence, which may yet be alive (a stalled loop):
        # one heard from again must start over with us. A few bytes per instance that died.
        self.silent: set[str] = set()
        # docs/scaling.md, Ordering: the sequence of what this instance says of its apps; per
        # peer, the sequence of its latest SYNC; and the connections whose GONE came lately.
        self.seq = 0
        self.floors: dict[str, int] = {}
        self.ended: dict[str, tuple[int, str, float]] = {}  # client ID -> (epoch, instance, until)
        # docs/scaling.md, Apps held elsewhere: how many remote apps' tool sets are kept here.
        self.kept = 0
        self.max_kept = bridge.limits.max_remote_apps
        self.not_kept = 0  # times an app's tools were not kept for the bound (a metric)
        self._warn_at = -math.inf
        # docs/scaling.md, Upgrades: instances that announced another WIRE_VERSION (ignored), and
        # when a message too short for any release may be logged again.
        self.incompatible: dict[str, object] = {}
        self._malformed_warn_at = -math.inf
        self.connected = False
        self._beat_at = -math.inf
        self.now = 0.0
        bridge.directory = self

    # -- subjects ----------------------------------------------------------------------------

    def app_subject(self, client_id: str) -> str:
        return f"{self.prefix}.app.{subject_id(client_id)}"

    def instance_subject(self, instance: str) -> str:
        return f"{self.prefix}.i.{instance}"

    @property
    def beat_subject(self) -> str:
        return f"{self.prefix}.beat"

    def subscriptions(self) -> tuple[str, ...]:
        """What the bus subscribes this instance to."""
        return (f"{self.prefix}.app.*", self.instance_subject(self.instance), self.beat_subject)

    # -- the bridge's hooks: local apps (per connection, never per call) ----------------------

    def attached(self, app) -> None:
        """A local connection took its client ID: claim it in the cluster with a new epoch."""
        if type(app) is RemoteApp:
            return
        self.clock += 1
        epoch = self.clock
        client_id = app.client_id
        self.local[client_id] = (app, epoch)
        self.claims[client_id] = (epoch, self.instance)
        self._send_state(self.app_subject(client_id), client_id, app, epoch)

    def registered(self, app) -> None:
        """A local app's tool set changed: every instance learns it."""
        if type(app) is RemoteApp:
            return
        held = self.local.get(app.client_id)
        if held is not None and held[0] is app:
            self._send_state(self.app_subject(app.client_id), app.client_id, app, held[1])

    def detached(self, app) -> None:
        """The app holding its client ID went away."""
        client_id = app.client_id
        if type(app) is RemoteApp:
            self.release(app)
            if self.claims.get(client_id) == (app.epoch, app.instance):
                del self.claims[client_id]
            return
        held = self.local.get(client_id)
        if held is not None and held[0] is app:
            del self.local[client_id]
            epoch = held[1]
            if self.claims.get(client_id) == (epoch, self.instance):
                del self.claims[client_id]
            if self.connected:
                self.seq += 1
                self.bus.send(self.app_subject(client_id), (GONE, client_id, epoch, self.instance, self.seq))

    def _send_state(self, subject: str, client_id: str, app, epoch: int) -> None:
        if not self.connected:
            return
        toolset = app.toolset
        tools, text = (None, None) if toolset is None else (toolset.tools_json, toolset.instructions)
        self.seq += 1
        self.bus.send(subject, (STATE, client_id, epoch, self.instance, tools, text, self.seq))

    def undeliverable(self, subject: str, message: tuple, limit: int) -> None:
        """The bus cannot carry `message` (over `limit` bytes): its call fails with a tool error rather than waiting."""
        kind = message[0]
        text = outcomes.too_large_between_instances(limit)
        if kind == APP:  # a call for a remote app: it fails here
            self.receive((ERROR, message[2], _decode_forwarded(message[4]).id, text, TOO_LARGE), self.now)
        elif kind == RESULT:  # an app's answer: the agent's instance gets the error instead
            self.bus.send(subject, (ERROR, message[1], message[2], text, TOO_LARGE))
        else:
            logger.warning("cluster: a message about %r is over %d bytes: not sent", message[1], limit)

    def cancel_legacy(self, client_id: str, request_id: bytes, session: bytes | None) -> None:
        """A legacy notifications/cancelled that named no call waiting here: the instance holding it cancels it."""
        if self.connected:
            self.bus.send(self.beat_subject, (CANCEL, client_id, bytes(request_id), session, self.instance))

    def call_ended(self, call: object, outcome: int) -> None:
        """A call ended (the bridge tells each end): counted when it crossed instances (docs/operations.md)."""
        if type(call) is ForwardedCall:
            call.outcome = outcome  # its ERROR tells the agent's instance
            self.bridge.counters.served[outcome] += 1
        elif outcome != TOO_LARGE and type(getattr(call, "app", None)) is RemoteApp:
            # A call over 4 MiB is refused by the bridge before it is sent, as for a local app:
            # it never left this instance, so it is not forwarded. The only too_large of a
            # forwarded call is the bus's refusal, counted where its ERROR is read (`receive`).
            self.bridge.counters.forwarded[outcome] += 1

    # -- the bus ------------------------------------------------------------------------------

    def bus_up(self, now: float) -> None:
        """Connected (again) to the bus: say who we are and what we hold."""
        self.connected = True
        self._announce_all(self.beat_subject)
        self._beat_at = now + BEAT_EVERY

    def _announce_all(self, subject: str) -> None:
        """SYNC, then the state of every app held here, on one subject so that they arrive in this order.

        Whoever receives the SYNC forgets what it knew of this instance's apps, and the states
        that follow (in the same turn) say what is true now: an app that left while the bus was
        down is gone everywhere, and calls this instance dropped meanwhile fail at once.
        """
        self.seq += 1
        self.bus.send(subject, (SYNC, self.instance, self.seq, WIRE_VERSION))
        for client_id, (app, epoch) in list(self.local.items()):
            self._send_state(subject, client_id, app, epoch)

    def bus_down(self) -> None:
        """The bus is gone: apps held elsewhere are unreachable (their calls fail), calls for ours are dropped."""
        self.connected = False
        for instance in list(self.peers):
            self._peer_gone(instance)
        for call in list(self.forwarded.values()):
            self.bridge.abandon(call)
        self.forwarded.clear()

    def receive(self, message: tuple, now: float) -> None:
        """One message from the bus."""
        self.now = now
        self.bridge.counters.now = now  # when a result or a departure in it ends a call
        size = len(message)
        kind = message[0] if size else 0
        if size != _LENGTH.get(kind, size):  # another release's layout (a kind unknown here: ignored below)
            message = self._fitted(message, kind, now)
            if message is None:
                return
        incompatible = self.incompatible
        if kind == APP:
            if incompatible and message[1] in incompatible:
                return
            self._on_app_message(message[1], message[2], message[3], message[4], now)
        elif kind == RESULT or kind == ERROR:
            app = self.bridge.apps.get(message[1])
            if type(app) is not RemoteApp:
                return
            call = app.calls.pop(message[2], None)
            if call is None:
                return  # timed out, cancelled or failed already
            if kind == RESULT:
                # Its shape is read again (a walk of bytes the app's instance checked), so that
                # this instance, which owns the call, counts a tool error from the app as one.
                result = msgspec.Raw(message[3])
                self.bridge.complete(call, result, result_shape(result))
            else:
                outcome = message[4]
                self.bridge.calls.finish(call)
                self.bridge._ended(call, outcome, now)
                if outcome == TOO_LARGE:  # the call or its answer was too large for the bus
                    self.bridge.counters.forwarded[TOO_LARGE] += 1
                call.call_error(message[3])
        elif not self.connected:
            return  # read before the bus went down: what it says of other instances is stale
        elif kind == STATE:
            if incompatible and message[3] in incompatible:
                return
            self._on_state(message[1], message[2], message[3], message[4], message[5], message[6], now)
        elif kind == GONE:
            client_id, epoch, instance = message[1], message[2], message[3]
            if instance == self.instance or message[4] < self.floors.get(instance, 0):
                return
            if incompatible and instance in incompatible:
                return
            # Its connection has ended: a STATE of it delivered after this (by another subject)
            # must not bring it back (docs/scaling.md, Ordering).
            ended = self.ended
            ended.pop(client_id, None)
            ended[client_id] = (epoch, instance, now + DEAD_AFTER)
            if self.claims.get(client_id) != (epoch, instance):
                return
            del self.claims[client_id]
            app = self.bridge.apps.get(client_id)
            if type(app) is RemoteApp and app.epoch == epoch and app.instance == instance:
                self.bridge.detach(app)
        elif kind == CANCEL:
            if incompatible and message[4] in incompatible:
                return
            cancel_call(self.bridge, message[1], message[2], message[3])
        elif kind == BEAT or kind == SYNC:
            instance = message[1]
            if instance == self.instance:
                return
            version = message[2] if kind == BEAT else message[3]
            if version != WIRE_VERSION or type(version) is not int:
                self._incompatible(instance, version)
                return
            known = instance in self.peers
            self.peers[instance] = now
            if kind == SYNC:
                if message[2] < self.floors.get(instance, 0):
                    return  # an older SYNC, delivered after a newer one (docs/scaling.md, Ordering)
                self.floors[instance] = message[2]
                # It starts over (it joined, or its bus came back): what we knew of its apps is
                # replaced by the states that follow; it learns ours.
                self.silent.discard(instance)
                self._forget_apps_of(instance)
                subject = self.instance_subject(instance)
                for client_id, (app, epoch) in list(self.local.items()):
                    self._send_state(subject, client_id, app, epoch)
            elif instance in self.silent:
                # An instance we had taken as gone, which dropped our calls to its apps and
                # cancelled its calls here: each side starts over with the other's whole state.
                self.silent.discard(instance)
                self._announce_all(self.instance_subject(instance))
            elif not known:
                # Never heard of (it joined before us, and holds no app that told us of it): it
                # lost nothing of ours, so a SYNC, which fails calls in flight, is not due; it
                # learns what we hold.
                subject = self.instance_subject(instance)
                for client_id, (app, epoch) in list(self.local.items()):
                    self._send_state(subject, client_id, app, epoch)

    def _fitted(self, message: list, kind: int, now: float) -> list | None:
        """A message in another release's layout, as this one reads it; None when no release sends it so short."""
        size = len(message)
        if size > _LENGTH[kind]:
            return message  # fields a newer release added at the end: ignored
        if size < _OLDEST_LENGTH[kind]:
            if now >= self._malformed_warn_at:  # a line a minute at most, whoever sends them
                self._malformed_warn_at = now + 60.0
                logger.warning(
                    "cluster: a message of kind %d has %d fields, fewer than any release sends: dropped",
                    kind,
                    size,
                )
            return None
        fitted = list(message)
        if kind == ERROR:
            fitted.append(_outcome_of(fitted[3]))
        elif kind == BEAT or kind == SYNC:
            fitted.append(1)  # no version: a release from before it was announced, of version 1
        elif kind == CANCEL:
            fitted.append(None)  # no sender: a release from before it was named, of version 1 too
        return fitted

    def _incompatible(self, instance: object, version: object) -> None:
        """An instance announced another WIRE_VERSION: it is ignored from now on, with one warning."""
        if instance in self.incompatible:
            return
        self.incompatible[instance] = version  # type: ignore[index]
        logger.warning(
            "cluster: instance %s speaks cluster wire version %r, this one %d: it is ignored and its apps "
            "are not reachable from here; a cluster runs one wire version (docs/scaling.md, Upgrades)",
            instance,
            version,
            WIRE_VERSION,
        )
        if instance in self.peers:
            self._peer_gone(instance)  # type: ignore[arg-type]

    def _on_state(
        self,
        client_id: str,
        epoch: int,
        instance: str,
        tools: bytes | None,
        text: str | None,
        seq: int,
        now: float,
    ) -> None:
        if instance == self.instance or seq < self.floors.get(instance, 0):
            return
        ended = self.ended.get(client_id)
        if ended is not None and ended[0] == epoch and ended[1] == instance:
            return  # that connection's GONE came first
        if instance not in self.peers:
            self.peers[instance] = now
        if epoch > self.clock:
            self.clock = epoch
        claim = (epoch, instance)
        current = self.claims.get(client_id)
        bridge = self.bridge
        if current is None or claim > current:
            # A newer connection for this ID, elsewhere: it holds the ID from now on; the bridge
            # closes the one it replaces with 4409 if that one is here (ClientMCP v1 §3.1).
            self.claims[client_id] = claim
            self.local.pop(client_id, None)
            bridge.attach(RemoteApp(self, client_id, instance, epoch, seq), now)
        elif claim != current:
            return  # older than the connection in use: that one's instance closes it
        app = bridge.apps.get(client_id)
        if type(app) is not RemoteApp or app.epoch != epoch:
            return
        if seq < app.seq:
            return  # an older state of this connection, delivered after a newer one
        app.seq = seq
        if tools is None:
            return
        if not app.kept:
            if self.kept >= self.max_kept:
                self._not_kept(app, now)
                return
            app.kept = True
            app.over_bound = False
            self.kept += 1
        try:
            toolset = parse_register(
                msgspec.Raw(tools),
                msgspec.UNSET if text is None else msgspec.Raw(encode_json(text)),
                _ANY_NUMBER,
            )
        except RegisterError:  # pragma: no cover - the app's instance accepted it
            return
        bridge.registered(app, toolset)

    def _not_kept(self, app: RemoteApp, now: float) -> None:
        """The bound of remote apps is reached: this one is known to be online, without its tools."""
        if not app.over_bound:
            app.over_bound = True
            self.not_kept += 1
        if now >= self._warn_at:  # at most a line a minute, however many apps are over
            self._warn_at = now + 60.0
            logger.warning(
                "cluster: this instance keeps the tools of %d apps held elsewhere (--max-remote-apps); "
                "agents here get a tool error for the others",
                self.max_kept,
            )

    def release(self, app: RemoteApp) -> None:
        """A remote app leaves this instance's apps: its tool set no longer counts against the bound."""
        if app.kept:
            app.kept = False
            self.kept -= 1

    def _on_app_message(self, origin: str, client_id: str, epoch: int, data: bytes, now: float) -> None:
        message = _decode_forwarded(data)
        if message.type == "cancel":
            call = self.forwarded.pop((origin, message.id), None)
            if call is not None:
                self.bridge.abandon(call)
            return
        call = ForwardedCall(self, origin, message.id, client_id)
        held = self.local.get(client_id)
        if held is None or held[1] != epoch:
            # The connection the agent's instance meant is gone (replaced or closed).
            self.call_ended(call, DISCONNECTED)
            call.call_error(outcomes.DISCONNECTED)
            return
        app = held[0]
        toolset = app.toolset  # type: ignore[attr-defined]
        tool = toolset.tools.get(message.name) if toolset is not None else None
        if tool is None:
            if toolset is None:
                self.call_ended(call, NOT_REGISTERED)
                call.call_error(outcomes.NOT_REGISTERED)
            else:
                self.call_ended(call, UNKNOWN_TOOL)
                call.call_error(f"Unknown tool: {message.name}")
            return
        self.forwarded[(origin, message.id)] = call
        self.bridge.start_call(app, tool, bytes(message.arguments), call, now)  # type: ignore[arg-type]

    # -- time ---------------------------------------------------------------------------------

    def on_timer(self, now: float) -> None:
        """Send a heartbeat when due; instances silent for DEAD_AFTER seconds are gone."""
        self.now = now
        if not self.connected:
            return
        if now >= self._beat_at:
            self._beat_at = now + BEAT_EVERY
            self.bus.send(self.beat_subject, (BEAT, self.instance, WIRE_VERSION))
        ended = self.ended
        while ended:
            client_id = next(iter(ended))
            if ended[client_id][2] > now:
                break
            del ended[client_id]
        for instance, heard in list(self.peers.items()):
            if now - heard > DEAD_AFTER:
                self.silent.add(instance)
                self._peer_gone(instance)

    def _peer_gone(self, instance: str) -> None:
        """An instance stopped answering: its apps are offline here, their calls fail as disconnected."""
        self.peers.pop(instance, None)
        self.floors.pop(instance, None)
        bridge = self.bridge
        for key, call in list(self.forwarded.items()):
            if key[0] == instance:  # its agents are gone with it: our apps get `cancel`
                del self.forwarded[key]
                bridge.abandon(call)
        self._forget_apps_of(instance)

    def _forget_apps_of(self, instance: str) -> None:
        bridge = self.bridge
        for client_id, app in list(bridge.apps.items()):
            if type(app) is RemoteApp and app.instance == instance:
                if self.claims.get(client_id) == (app.epoch, instance):
                    del self.claims[client_id]
                bridge.detach(app)
