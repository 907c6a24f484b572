"""The app directory: which instance of a cluster holds each client ID's app, and the calls between them.

Sans-I/O like the rest of the core: a `Bus` port carries messages (tuples) to subjects and
the I/O side feeds what arrives to `Directory.receive`, with `now`; `on_timer(now)` sends
heartbeats and finds instances that stopped sending them. clientmcp_fast/net/nats.py runs
it on NATS; tests run it on an in-memory bus (docs/scaling.md).

The directory is the bridge's `AppRouter` (core/apps.py): the bridge tells it of each app
connected here, and it tells the other instances. An app held by another instance stands in
the bridge's `apps` as a `RemoteApp`, an `App` whose `send` forwards the bridge's `call` and
`cancel` to the instance holding it. So a tools/call, its timeout, streaming, cancellation
and every outcome run through the same `Bridge` code as a local call, and a single process,
whose router tells no one, is unchanged.

Replacement (ClientMCP v1 §3.1) across instances: every connection gets an epoch from a
Lamport clock (one above every epoch this instance has seen, and above its start time, so
that a restarted instance's connections are newer than its previous life's); the connection with the
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

Faults (docs/scaling.md, Calls that never run late, Bounds): every field of a message is
checked before it is acted on, and a bad one dropped and counted; an instance that took
another as gone refuses the calls it sent before the two started over, and one that finds
itself silent for STALLED_AFTER starts over by itself, so that no call its agent was told
failed runs later. Who may send messages at all is the NATS side's check (core/bus_auth.py).

Upgrades (docs/scaling.md, Upgrades): instances of one WIRE_VERSION share a cluster whatever
their releases. A release may add fields at the end of a message: one from an older release
lacks them and is read with defaults that keep the older behaviour, and fields added by a newer
one are ignored, as is a kind of message this release does not know. Any other change raises
WIRE_VERSION, which every BEAT and SYNC announces: an instance of another version is ignored,
with one warning.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Protocol

import msgspec

from clientmcp_fast.core import outcomes
from clientmcp_fast.core.agent_legacy import cancel_call
from clientmcp_fast.core.apps import AppRouter
from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.counters import (
    DISCONNECTED,
    NOT_REGISTERED,
    OUTCOMES,
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
    from clientmcp_fast.core.apps import App
    from clientmcp_fast.core.bridge import Bridge

# docs/scaling.md, Failure detection: a heartbeat every second; an instance not heard from for
# three is taken as gone, so its apps' calls fail within DEAD_AFTER + BEAT_EVERY seconds.
BEAT_EVERY = 1.0
DEAD_AFTER = 3.0
# docs/scaling.md, Calls that never run late: an instance that sent no heartbeat for this long
# (its loop stalled) may have been taken as gone by the others, which then failed their calls
# to its apps; it starts over with them rather than run those calls. Half a beat under
# DEAD_AFTER leaves time for the heartbeat it sends next to arrive before anyone gives up.
STALLED_AFTER = DEAD_AFTER - BEAT_EVERY / 2
# What one instance sends another in answer to a SYNC or a heartbeat (every state it holds)
# goes at most this often per instance; what is asked meanwhile is sent once, when due.
ANSWER_EVERY = 1.0

# docs/scaling.md, Upgrades: raised by a change of the messages that an older release cannot
# read (a field removed, moved or meaning something else), never by a field added at the end.
# Version 2 signs every message (core/bus_auth.py) and never hears version 1, which did not.
WIRE_VERSION = 2

# Message kinds (the first element of every message tuple).
STATE = 1  # (STATE, client_id, epoch, instance, tools_json | None, instructions | None, seq)
GONE = 2  # (GONE, client_id, epoch, instance, seq)
# (APP, from_instance, client_id, epoch, message, timeout_ms, floor): a call or cancel for the
# app; timeout_ms is the agent's instance's call timeout, floor the sequence of the latest SYNC
# it applied from the app's instance (docs/scaling.md, Calls that never run late).
APP = 3
RESULT = 4  # (RESULT, client_id, call_id, result, has_result_type)
ERROR = 5  # (ERROR, client_id, call_id, text, outcome): outcome as in core/counters.py
BEAT = 6  # (BEAT, instance, wire_version)
# (SYNC, instance, seq, wire_version, answer): forget what I said before; the states that
# follow are what I hold now; with `answer`, send me yours the same way.
SYNC = 7
CANCEL = 8  # (CANCEL, client_id, request_id, session | None, instance): a legacy notifications/cancelled

# docs/scaling.md, Bounds: every integer on the bus is in [0, MAX_INTEGER], so that adding one
# to an epoch never leaves MessagePack's range; an instance's ID is a short name of its own.
MAX_INTEGER = 1 << 62
MAX_STRING = 1024
_INSTANCE_NAME = re.compile(r"[0-9A-Za-z_-]{1,64}")
_NAME = "instance"  # a field naming an instance: it becomes part of a subject
_NONE = type(None)
# Each kind's fields after the kind, as this release sends them; a message with fewer is
# dropped as malformed, fields after them (a later release's) are ignored (Upgrades).
_FIELDS: dict[int, tuple] = {
    STATE: ((str,), (int,), _NAME, (bytes, _NONE), (str, _NONE), (int,)),
    GONE: ((str,), (int,), _NAME, (int,)),
    APP: (_NAME, (str,), (int,), (bytes,), (int,), (int,)),
    RESULT: ((str,), (str,), (bytes,), (bool,)),
    ERROR: ((str,), (str,), (str,), (int,)),
    BEAT: (_NAME, (int,)),
    SYNC: (_NAME, (int,), (int,), (bool,)),
    CANCEL: ((str,), (bytes,), (bytes, _NONE), _NAME),
}

# Why a bus message was dropped: the `reason` label of clientmcp_cluster_messages_dropped_total
# (the NATS side finds the first four, the directory the last).
DROP_REASONS = ("unsigned", "forged", "stale", "replayed", "malformed")
MALFORMED = "malformed"

# The other side checked the register against its own limit already.
_ANY_NUMBER = 1 << 30

# A connection's epoch starts above the wall-clock milliseconds of its instance's start times
# 2**EPOCH_SHIFT, so that a restarted instance's connections are newer than its previous life's.
EPOCH_SHIFT = 20


def epoch_floor(wall_seconds: float) -> int:
    """The first epoch of an instance started at `wall_seconds` (docs/scaling.md, Replacement)."""
    return int(wall_seconds * 1000) << EPOCH_SHIFT


class Bus(Protocol):
    """How the directory reaches the other instances (the NATS adapter; an in-memory one in tests)."""

    def send(self, subject: str, message: tuple) -> None:
        """Send one message to a subject; the bus may batch what is sent in one loop turn."""


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
    """An app connected to another instance: the bridge's `App` (core/apps.py), which forwards what it is sent."""

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

    def send(self, message: bytes) -> None:
        """A `call` or `cancel` the bridge wrote for this app: to its instance."""
        directory = self.directory
        directory.bus.send(
            self.subject,
            (
                APP,
                directory.instance,
                self.client_id,
                self.epoch,
                message,
                directory.timeout_ms,
                directory.floors.get(self.instance, 0),
            ),
        )

    def close(self, code: int, reason: str, now: float) -> None:
        """Replaced (or the bridge ends): its calls fail now; the connection is closed where it is."""
        self.directory.drop_remote(self, now)

    def call_ended(self, call: Call, outcome: int) -> None:
        """A call to this app ended: counted as forwarded (docs/operations.md, Metrics)."""
        # A call over 4 MiB is refused by the bridge before it is sent, as for a local app: it
        # never left this instance, so it is not forwarded. The only too_large of a forwarded
        # call is the bus's refusal, counted where its ERROR is read (`receive`).
        if outcome != TOO_LARGE:
            self.directory.bridge.counters.forwarded[outcome] += 1

    def unregistered_text(self) -> str:
        """The tool error while its tools are unknown here: not registered, or not kept for the bound."""
        return outcomes.TOOLS_NOT_KEPT if self.over_bound else outcomes.NOT_REGISTERED


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
        self.outcome = ANSWERED  # how it ended, set before `call_error` (`ended`)

    def ended(self, outcome: int) -> None:
        """Counted as served (docs/operations.md, Metrics); its ERROR tells the agent's instance how it ended."""
        self.outcome = outcome
        self.directory.bridge.counters.served[outcome] += 1

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


class Directory(AppRouter):
    """This instance's view of the cluster: whose app is where, and the calls crossing instances."""

    def __init__(
        self, bridge: Bridge, bus: Bus, instance: str, prefix: str = "clientmcp", first_epoch: int = 0
    ) -> None:
        self.bridge = bridge
        self.bus = bus
        self.instance = instance
        self.prefix = prefix
        # The Lamport clock of connection epochs, from `epoch_floor` of the start time (Replacement).
        self.clock = first_epoch
        self.timeout_ms = int(
            bridge.limits.call_timeout * 1000
        )  # sent with each call (Calls that never run late)
        self.claims: dict[str, tuple[int, str]] = {}  # client ID -> (epoch, instance) holding it
        # docs/scaling.md, Replacement: per client ID, the best state of a connection elsewhere
        # that lost to the claim in use (epoch, instance, tools, instructions, seq); it takes the
        # ID if that claim ends first (its instance died, say), rather than stay unknown here.
        self.runners_up: dict[str, tuple] = {}
        self.local: dict[str, tuple[App, int]] = {}  # client ID -> (app, epoch) connected here
        self.remote: dict[str, RemoteApp] = {}  # client ID -> the app held elsewhere the bridge has
        self.forwarded: dict[tuple[str, str], ForwardedCall] = {}
        self.peers: dict[str, float] = {}  # instance -> when last heard from
        # Instances taken as gone for their silence, which may yet be alive (a stalled loop):
        # one heard from again must start over with us. A few bytes per instance that died.
        self.silent: set[str] = set()
        # docs/scaling.md, Ordering: the sequence of what this instance says of its apps; per
        # peer, the sequence of its latest SYNC; and the connections whose GONE came lately.
        self.seq = 0
        self.floors: dict[str, int] = {}
        # docs/scaling.md, Calls that never run late: per instance this one gave up on, the
        # sequence its next SYNC will have; a call from it sent before it applied that SYNC was
        # failed there already, and is refused here.
        self.required: dict[str, int] = {}
        # Answers owed (instance -> whether to ask for one back) and when each was last sent.
        self._owed: dict[str, bool] = {}
        self._answered: dict[str, float] = {}
        self.restarts = 0  # times this instance started over after its own stall (a metric)
        self.ended: dict[str, tuple[int, str, float]] = {}  # client ID -> (epoch, instance, until)
        # docs/scaling.md, Apps held elsewhere: how many remote apps' tool sets are kept here.
        self.kept = 0
        self.max_kept = bridge.limits.max_remote_apps
        self.not_kept = 0  # times an app's tools were not kept for the bound (a metric)
        self._warn_at = -math.inf
        # docs/scaling.md, Upgrades: instances that announced another WIRE_VERSION (ignored), and
        # when a message too short for any release may be logged again.
        self.incompatible: dict[str, object] = {}
        # docs/scaling.md, Bounds: bus messages dropped, by reason, each reason logged once a minute.
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self._drop_warn_at = dict.fromkeys(DROP_REASONS, -math.inf)
        self.connected = False
        self._beat_at = -math.inf
        self._beat_sent = -math.inf

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

    # -- the AppRouter: apps connected here (per connection, never per call) ------------------

    def attached(self, app: App, now: float) -> None:
        """A local connection took its client ID: claim it in the cluster with a new epoch."""
        self.clock += 1
        epoch = self.clock
        client_id = app.client_id
        self.local[client_id] = (app, epoch)
        self.claims[client_id] = (epoch, self.instance)
        self._send_state(self.app_subject(client_id), client_id, app, epoch)

    def registered(self, app: App) -> None:
        """A local app's tool set changed: every instance learns it."""
        held = self.local.get(app.client_id)
        if held is not None and held[0] is app:
            self._send_state(self.app_subject(app.client_id), app.client_id, app, held[1])

    def detached(self, app: App) -> None:
        """The local app holding its client ID went away."""
        client_id = app.client_id
        held = self.local.get(client_id)
        if held is not None and held[0] is app:
            del self.local[client_id]
            epoch = held[1]
            if self.claims.get(client_id) == (epoch, self.instance):
                del self.claims[client_id]
            if self.connected:
                self.seq += 1
                self.bus.send(self.app_subject(client_id), (GONE, client_id, epoch, self.instance, self.seq))

    def _send_state(self, subject: str, client_id: str, app: App, epoch: int) -> None:
        if not self.connected:
            return
        toolset = app.toolset
        tools, text = (None, None) if toolset is None else (toolset.tools_json, toolset.instructions)
        self.seq += 1
        self.bus.send(subject, (STATE, client_id, epoch, self.instance, tools, text, self.seq))

    def undeliverable(self, subject: str, message: tuple, limit: int, now: float) -> None:
        """The bus cannot carry `message` (over `limit` bytes): its call fails with a tool error rather than waiting."""
        kind = message[0]
        text = outcomes.too_large_between_instances(limit)
        if kind == APP:  # a call for a remote app: it fails here
            self.receive((ERROR, message[2], _decode_forwarded(message[4]).id, text, TOO_LARGE), now)
        elif kind == RESULT:  # an app's answer: the agent's instance gets the error instead
            self.bus.send(subject, (ERROR, message[1], message[2], text, TOO_LARGE))
        else:
            logger.warning("cluster: a message about %r is over %d bytes: not sent", message[1], limit)

    def cancel_elsewhere(self, client_id: str, request_id: bytes, session: bytes | None) -> None:
        """A legacy notifications/cancelled that named no call waiting here: the instance holding it cancels it."""
        if self.connected:
            self.bus.send(self.beat_subject, (CANCEL, client_id, bytes(request_id), session, self.instance))

    def is_remote(self, app: App) -> bool:
        """Whether `app` is the bridge's app held by another instance."""
        return self.remote.get(app.client_id) is app

    # -- apps held elsewhere, in the bridge ------------------------------------------------------

    def _hold_remote(self, app: RemoteApp, now: float) -> None:
        """A connection elsewhere holds its client ID: the bridge's app for it from now on."""
        self.bridge.hold(app, now)  # closes the app it replaces, which may be a remote one
        self.remote[app.client_id] = app

    def drop_remote(self, app: RemoteApp, now: float) -> None:
        """A remote app leaves the bridge (gone, replaced, unreachable): its calls fail now."""
        client_id = app.client_id
        if self.remote.get(client_id) is app:
            del self.remote[client_id]
        if self.claims.get(client_id) == (app.epoch, app.instance):
            del self.claims[client_id]
        self.release(app)
        self.bridge.forget(app, now)

    # -- the bus ------------------------------------------------------------------------------

    def bus_up(self, now: float) -> None:
        """Connected (again) to the bus: say who we are and what we hold, and ask the others for theirs."""
        self.connected = True
        self._beat_sent = now
        self._announce_all(self.beat_subject, True)
        self._beat_at = now + BEAT_EVERY

    def _announce_all(self, subject: str, answer: bool) -> None:
        """SYNC, then the state of every app held here, on one subject so that they arrive in this order.

        Whoever receives the SYNC forgets what it knew of this instance's apps and ends the
        calls it made to them or ran for them, and the states that follow (in the same turn)
        say what is true now: an app that left while the bus was down is gone everywhere, and
        calls this instance dropped meanwhile fail at once. With `answer`, it sends its own the
        same way (without asking back).
        """
        self.seq += 1
        self.bus.send(subject, (SYNC, self.instance, self.seq, WIRE_VERSION, answer))
        for client_id, (app, epoch) in list(self.local.items()):
            self._send_state(subject, client_id, app, epoch)

    def _owe(self, instance: str, ask: bool, now: float) -> None:
        """Send `instance` what we hold (a SYNC asking back with `ask`), at once or when ANSWER_EVERY allows."""
        if now - self._answered.get(instance, -math.inf) >= ANSWER_EVERY:
            self._answer(instance, ask, now)
        else:  # docs/scaling.md, Bounds: what is asked meanwhile is sent once, when due
            self._owed[instance] = ask or self._owed.get(instance, False)

    def _answer(self, instance: str, ask: bool, now: float) -> None:
        self._answered[instance] = now
        self._owed.pop(instance, None)
        self._announce_all(self.instance_subject(instance), ask)

    def bus_down(self, now: float) -> None:
        """The bus is gone: apps held elsewhere are unreachable (their calls fail), calls for ours are dropped."""
        self.connected = False
        for instance in list(self.peers):
            self._peer_gone(instance, now)
        for call in list(self.forwarded.values()):
            self.bridge.abandon(call, now)
        self.forwarded.clear()

    def dropped_message(self, reason: str, now: float, detail: str = "") -> None:
        """A bus message not taken (`reason` in DROP_REASONS): counted, and logged at most once a minute per reason."""
        self.dropped[reason] += 1
        if now >= self._drop_warn_at[reason]:
            self._drop_warn_at[reason] = now + 60.0
            logger.warning(
                "cluster: dropped a bus message (%s%s); counted in clientmcp_cluster_messages_dropped_total, "
                "said at most once a minute per reason (docs/scaling.md, Threat model)",
                reason,
                f": {detail}" if detail else "",
            )

    def receive(self, message: list, now: float, age: float = 0.0) -> None:
        """One message from the bus, sent `age` seconds ago by its sender's clock."""
        if self.connected and now - self._beat_sent >= STALLED_AFTER:
            self._start_over(now)  # before anything of the backlog a stall left is acted on
        kind = self._checked(message, now)
        if kind is None:
            return
        incompatible = self.incompatible
        if kind == APP:
            if incompatible and message[1] in incompatible:
                return
            self._on_app_message(message, now, age)
        elif kind == RESULT or kind == ERROR:
            app = self.remote.get(message[1])
            if app is None:
                return
            call = app.calls.pop(message[2], None)
            if call is None:
                return  # timed out, cancelled or failed already
            if kind == RESULT:
                # Its shape is read again (a walk of bytes the app's instance checked), so that
                # this instance, which owns the call, counts a tool error from the app as one.
                result = msgspec.Raw(message[3])
                self.bridge.complete(call, result, result_shape(result), now)
            else:
                outcome = message[4]
                if outcome == TOO_LARGE:  # the call or its answer was too large for the bus
                    self.bridge.counters.forwarded[TOO_LARGE] += 1
                self.bridge.fail(call, outcome, message[3], now)
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
            runner = self.runners_up.get(client_id)
            if runner is not None and runner[0] == epoch and runner[1] == instance:
                del self.runners_up[client_id]
            if self.claims.get(client_id) != (epoch, instance):
                return
            del self.claims[client_id]
            app = self.remote.get(client_id)
            if app is not None and app.epoch == epoch and app.instance == instance:
                self.drop_remote(app, now)
            self._promote(client_id, now)
        elif kind == CANCEL:
            if incompatible and message[4] in incompatible:
                return
            cancel_call(self.bridge, message[1], message[2], message[3], now)
        elif kind == BEAT or kind == SYNC:
            instance = message[1]
            if instance == self.instance:
                return
            version = message[2] if kind == BEAT else message[3]
            if version != WIRE_VERSION:
                self._incompatible(instance, version, now)
                return
            known = instance in self.peers
            if kind == SYNC:
                if message[2] < self.floors.get(instance, 0):
                    return  # an older SYNC, delivered after a newer one (docs/scaling.md, Ordering)
                self.peers[instance] = now
                self.floors[instance] = message[2]
                # It starts over (it joined, its bus came back, or it answers ours): it forgot our
                # apps and failed its calls to them, so the ones we run for it end too (the app
                # gets `cancel`); what we knew of its apps is replaced by the states that follow.
                self.silent.discard(instance)
                self._abandon_calls_from(instance, now)
                self._forget_apps_of(instance, now, message[2])
                if message[4]:
                    self._owe(instance, False, now)
                return
            self.peers[instance] = now
            if instance in self.silent:
                # An instance we had taken as gone, which dropped our calls to its apps and
                # cancelled its calls here: each side starts over with the other's whole state.
                self.silent.discard(instance)
                self._owe(instance, True, now)
            elif not known:
                # Never heard of (its SYNC did not reach us): it learns what we hold. A SYNC,
                # which fails calls in flight, is not due: it lost nothing of ours.
                self._owe_states(instance, now)

    def _owe_states(self, instance: str, now: float) -> None:
        """The states of our apps to an instance that lost nothing of ours, within ANSWER_EVERY."""
        if now - self._answered.get(instance, -math.inf) < ANSWER_EVERY:
            return  # answered within the second: it has them
        self._answered[instance] = now
        subject = self.instance_subject(instance)
        for client_id, (app, epoch) in list(self.local.items()):
            self._send_state(subject, client_id, app, epoch)

    def _checked(self, message: list, now: float) -> int | None:
        """The kind of a message whose fields are all of their types and bounds; None if it is to be ignored."""
        size = len(message)
        kind = message[0] if size else None
        # A forwarded call's two messages, checked inline as _FIELDS says: the walk below would
        # cost a forwarded call more than the rest of its handling here (docs/benchmarks.md).
        if kind == APP and size >= 7:
            origin, epoch, timeout, floor = message[1], message[3], message[5], message[6]
            if (
                type(origin) is str
                and (origin in self.peers or _INSTANCE_NAME.fullmatch(origin) is not None)
                and type(message[2]) is str
                and len(message[2]) <= MAX_STRING
                and type(message[4]) is bytes
                and type(epoch) is int
                and type(timeout) is int
                and type(floor) is int
                and 0 <= epoch <= MAX_INTEGER
                and 0 <= timeout <= MAX_INTEGER
                and 0 <= floor <= MAX_INTEGER
            ):
                return APP
        elif kind == RESULT and size >= 5:
            if (
                type(message[1]) is str
                and type(message[2]) is str
                and type(message[3]) is bytes
                and type(message[4]) is bool
                and len(message[1]) <= MAX_STRING
                and len(message[2]) <= MAX_STRING
            ):
                return RESULT
        if type(kind) is not int:
            self.dropped_message(MALFORMED, now, "no kind")
            return None
        fields = _FIELDS.get(kind)
        if fields is None:
            return None  # a kind of a later release (docs/scaling.md, Upgrades)
        if size <= len(fields):
            self.dropped_message(MALFORMED, now, f"a message of kind {kind} with {size} fields")
            return None
        for index, allowed in enumerate(fields, 1):
            value = message[index]
            of = type(value)
            if allowed is _NAME:
                good = of is str and _INSTANCE_NAME.fullmatch(value) is not None
            elif of not in allowed:
                good = False
            elif of is int:
                good = 0 <= value <= MAX_INTEGER
            elif of is str:
                good = len(value) <= MAX_STRING or (kind == STATE and index == 5)  # instructions
            else:
                good = True
            if not good:
                self.dropped_message(MALFORMED, now, f"field {index} of a message of kind {kind}")
                return None
        if kind == ERROR and message[4] >= len(OUTCOMES):
            self.dropped_message(MALFORMED, now, "an outcome no release has")
            return None
        return kind

    def _incompatible(self, instance: object, version: object, now: float) -> None:
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
            self._peer_gone(instance, now)  # type: ignore[arg-type]

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
            replaced = self.local.pop(client_id, None)
            if replaced is not None:  # its end, so that no instance keeps it as a runner-up
                self.seq += 1
                self.bus.send(
                    self.app_subject(client_id), (GONE, client_id, replaced[1], self.instance, self.seq)
                )
            self._hold_remote(RemoteApp(self, client_id, instance, epoch, seq), now)
        elif claim != current:
            # Older than the connection in use, whose instance closes it; unless that one ended
            # unseen (its instance restarted, with a clock behind): kept to take over then.
            if instance != current[1]:
                runner = self.runners_up.get(client_id)
                if runner is None or claim >= (runner[0], runner[1]):
                    self.runners_up[client_id] = (epoch, instance, tools, text, seq)
            return
        app = self.remote.get(client_id)
        if app is None or app.epoch != epoch:
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
        bridge.retool(app, toolset)

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

    def _on_app_message(self, message: list, now: float, age: float) -> None:
        """A call or cancel for an app held here, from an agent's instance."""
        origin, client_id, epoch = message[1], message[2], message[3]
        try:
            forwarded = _decode_forwarded(message[4])
        except msgspec.DecodeError:
            self.dropped_message(MALFORMED, now, "a call that is not one")
            return
        if forwarded.type == "cancel":
            call = self.forwarded.pop((origin, forwarded.id), None)
            if call is not None:
                self.bridge.abandon(call, now)
            return
        call = ForwardedCall(self, origin, forwarded.id, client_id)
        required = self.required.get(origin)
        if origin not in self.peers or (required is not None and message[6] < required):
            # docs/scaling.md, Calls that never run late: sent before its instance learned that we
            # had started over with it (or from one we took as gone), which failed it already.
            self._refuse(call, DISCONNECTED, outcomes.DISCONNECTED)
            return
        if required is not None:
            del self.required[origin]  # it has applied our SYNC: its later calls carry that floor
        timeout = message[5] / 1000
        if age >= timeout:  # its agent was told of the timeout already
            self._refuse(call, TIMEOUT, outcomes.timed_out(timeout))
            return
        held = self.local.get(client_id)
        if held is None or held[1] != epoch:
            # The connection the agent's instance meant is gone (replaced or closed).
            self._refuse(call, DISCONNECTED, outcomes.DISCONNECTED)
            return
        app = held[0]
        toolset = app.toolset  # type: ignore[attr-defined]
        tool = toolset.tools.get(forwarded.name) if toolset is not None else None
        if tool is None:
            if toolset is None:
                self._refuse(call, NOT_REGISTERED, outcomes.NOT_REGISTERED)
            else:
                self._refuse(call, UNKNOWN_TOOL, f"Unknown tool: {forwarded.name}")
            return
        arguments = forwarded.arguments
        if arguments is msgspec.UNSET:
            self.dropped_message(MALFORMED, now, "a call without arguments")
            return
        self.forwarded[(origin, forwarded.id)] = call
        self.bridge.start_call(app, tool, bytes(arguments), call, now)

    @staticmethod
    def _refuse(call: ForwardedCall, outcome: int, text: str) -> None:
        """A forwarded call that never reaches the app here: served with `outcome`, its agent told `text`."""
        call.ended(outcome)
        call.call_error(text)

    # -- time ---------------------------------------------------------------------------------

    def on_timer(self, now: float) -> None:
        """Send a heartbeat when due; instances silent for DEAD_AFTER seconds are gone."""
        if not self.connected:
            return
        if now - self._beat_sent >= STALLED_AFTER:
            self._start_over(now)
        if now >= self._beat_at:
            self._beat_at = now + BEAT_EVERY
            self._beat_sent = now
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
                self._peer_gone(instance, now)
        if self._owed:
            for instance, ask in list(self._owed.items()):
                if now - self._answered.get(instance, -math.inf) >= ANSWER_EVERY:
                    self._answer(instance, ask, now)

    def _start_over(self, now: float) -> None:
        """This instance was silent long enough to be taken as gone: every tie with the others starts again.

        docs/scaling.md, Calls that never run late: the others may have failed the calls they
        made to our apps and cancelled the ones ours made to theirs; so the calls we run for
        them end (the app gets `cancel`), ours to their apps fail, a call of theirs sent before
        they hear of this is refused, and a SYNC asks each for its state again.
        """
        self.restarts += 1
        logger.warning(
            "cluster: this instance sent no heartbeat for %.1f s (its event loop stalled?): the others may "
            "have taken it as gone, so its calls between instances end and it joins again",
            now - self._beat_sent,
        )
        for instance in list(self.peers):
            self._peer_gone(instance, now)
        self._beat_sent = now
        self._announce_all(self.beat_subject, True)

    def _peer_gone(self, instance: str, now: float) -> None:
        """An instance stopped answering: its apps are offline here, their calls fail as disconnected."""
        self.peers.pop(instance, None)
        self.floors.pop(instance, None)
        self._owed.pop(instance, None)
        self._answered.pop(instance, None)
        # Its calls sent before it hears our next SYNC are refused (Calls that never run late).
        self.required[instance] = self.seq + 1
        self._abandon_calls_from(instance, now)
        self._forget_apps_of(instance, now)

    def _abandon_calls_from(self, instance: str, now: float) -> None:
        """The calls we run for `instance`'s agents end: its agents were told already (the apps get `cancel`)."""
        bridge = self.bridge
        for key, call in list(self.forwarded.items()):
            if key[0] == instance:
                del self.forwarded[key]
                bridge.abandon(call, now)

    def _forget_apps_of(self, instance: str, now: float, before: int = MAX_INTEGER + 1) -> None:
        """`instance`'s apps are offline here; those it stated after sequence `before` stay (a SYNC delivered late)."""
        runners_up = self.runners_up
        if runners_up:
            for client_id, runner in list(runners_up.items()):
                if runner[1] == instance and runner[4] < before:
                    del runners_up[client_id]
        for client_id, app in list(self.remote.items()):
            if app.instance == instance and app.seq < before:
                self.drop_remote(app, now)
                if runners_up:
                    self._promote(client_id, now)

    def _promote(self, client_id: str, now: float) -> None:
        """The claim on `client_id` ended: a connection elsewhere that had lost to it takes the ID."""
        runner = self.runners_up.pop(client_id, None)
        if runner is not None and runner[1] in self.peers and client_id not in self.claims:
            epoch, instance, tools, text, seq = runner
            self._on_state(client_id, epoch, instance, tools, text, seq, now)
