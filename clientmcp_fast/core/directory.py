"""The app directory: which instance of a cluster holds each client ID's app, and the calls between them.

Sans-I/O like the rest of the core: a `Bus` port carries messages (core/wire.py) to subjects and
the I/O side feeds what arrives to `Directory.receive`, with `now`; `on_timer(now)` sends
heartbeats and finds instances that stopped sending them. clientmcp_fast/net/nats.py runs
it on NATS; tests run it on an in-memory bus (docs/scaling.md).

The directory is the bridge's `AppRouter` (core/apps.py): the bridge tells it of each app
connected here, and it tells the other instances. It keeps the membership of the cluster
(who is there, who holds which client ID); the calls between instances are
core/forwarding.py's, and the messages on the bus core/wire.py's.

Replacement (ClientMCP v1 §3.1) across instances: every connection gets an epoch from a
Lamport clock (one above every epoch this instance has seen, up to CLOCK_CEILING, and above
its start time, so that a restarted instance's connections are newer than its previous
life's); the connection with the highest (epoch, instance ID) holds the client ID
everywhere. A connection made after an instance heard of another one's claim always has a
higher epoch, so "newest" is the causal order; two made concurrently on two instances are
ordered by instance ID, the same way on every instance, so exactly one survives and the
others are closed with 4409.

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

Upgrades (docs/scaling.md, Upgrades): instances of one WIRE_VERSION (core/wire.py) share a
cluster whatever their releases; every BEAT and SYNC announces it, and an instance of another
version is ignored, with one warning.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import msgspec

from clientmcp_fast.core.agent_legacy import cancel_call
from clientmcp_fast.core.apps import AppRouter
from clientmcp_fast.core.forwarding import Forwarding, RemoteApp, decode_forwarded
from clientmcp_fast.core.outcomes import Outcome, too_large_between_instances
from clientmcp_fast.core.wire import (
    MAX_INTEGER,
    WIRE_VERSION,
    Authorize,
    Beat,
    Cancel,
    Consent,
    Error,
    Gone,
    Message,
    Progress,
    Result,
    State,
    Sync,
    ToApp,
)

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

# Why a bus message was dropped: the `reason` label of clientmcp_cluster_messages_dropped_total
# (the NATS side finds the first four, core/wire.py the last).
DROP_REASONS = ("unsigned", "forged", "stale", "replayed", "malformed")
MALFORMED = "malformed"

# A connection's epoch starts above the wall-clock milliseconds of its instance's start times
# 2**EPOCH_SHIFT, so that a restarted instance's connections are newer than its previous life's.
EPOCH_SHIFT = 20
# docs/scaling.md, Bounds: an epoch heard from another instance raises the Lamport clock up to
# this at most, so that the connections made here after it still get epochs within the bus's
# bound: one epoch of MAX_INTEGER, signed by a holder of the secret, left every later app of
# the instances that heard it unreadable to the others. 2**32 connections of room; the start
# times of epoch_floor stay below it until the year 2109.
CLOCK_CEILING = MAX_INTEGER - (1 << 32)


def epoch_floor(wall_seconds: float) -> int:
    """The first epoch of an instance started at `wall_seconds` (docs/scaling.md, Replacement)."""
    return int(wall_seconds * 1000) << EPOCH_SHIFT


class Bus(Protocol):
    """How the directory reaches the other instances (the NATS adapter; an in-memory one in tests)."""

    def send(self, subject: str, message: Message) -> None:
        """Send one message to a subject; the bus may batch what is sent in one loop turn."""


def subject_id(client_id: str) -> str:
    """A client ID as one subject token: hex of its UTF-8, so no ID is another's or holds `.`, `*`, `>`."""
    return client_id.encode().hex()


class Directory(AppRouter):
    """This instance's view of the cluster: who is in it, and whose app is where."""

    def __init__(
        self, bridge: Bridge, bus: Bus, instance: str, prefix: str = "clientmcp", first_epoch: int = 0
    ) -> None:
        self.bridge = bridge
        self.bus = bus
        self.instance = instance
        self.prefix = prefix
        # The Lamport clock of connection epochs, from `epoch_floor` of the start time (Replacement).
        self.clock = first_epoch
        self.claims: dict[str, tuple[int, str]] = {}  # client ID -> (epoch, instance) holding it
        # docs/scaling.md, Replacement: per client ID, the best state of a connection elsewhere
        # that lost to the claim in use (epoch, instance, tools, instructions, seq, consent); it
        # takes the ID if that claim ends first (its instance died, say), rather than stay unknown here.
        self.runners_up: dict[str, tuple] = {}
        self.local: dict[str, tuple[App, int]] = {}  # client ID -> (app, epoch) connected here
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
        # docs/scaling.md, Upgrades: instances that announced another WIRE_VERSION (ignored).
        self.incompatible: dict[str, object] = {}
        # docs/scaling.md, Bounds: bus messages dropped, by reason, each reason logged once a minute.
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self._drop_warn_at = dict.fromkeys(DROP_REASONS, -math.inf)
        self.connected = False
        self._beat_at = -math.inf
        self._beat_sent = -math.inf
        self.forwarding = Forwarding(bridge, bus, instance, self.floors)
        self._handlers = {
            ToApp: self._on_app_message,
            Result: self._on_answer,
            Error: self._on_answer,
            Progress: self._on_progress,
            Authorize: self._on_authorize,
            Consent: self._on_consent,
            State: self._on_state,
            Gone: self._on_gone,
            Cancel: self._on_cancel,
            Beat: self._on_beat,
            Sync: self._on_sync,
        }

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
        if self.clock < MAX_INTEGER:  # past CLOCK_CEILING only after 2**32 connections here
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
                self.bus.send(self.app_subject(client_id), Gone(client_id, epoch, self.instance, self.seq))

    def cancel_elsewhere(self, client_id: str, request_id: bytes, session: bytes | None) -> None:
        """A legacy notifications/cancelled that named no call waiting here: the instance holding it cancels it."""
        if self.connected:
            self.bus.send(self.beat_subject, Cancel(client_id, bytes(request_id), session, self.instance))

    def is_remote(self, app: App) -> bool:
        """Whether `app` is the bridge's app held by another instance."""
        return self.forwarding.is_remote(app)

    def _send_state(self, subject: str, client_id: str, app: App, epoch: int) -> None:
        if not self.connected:
            return
        toolset = app.toolset
        if toolset is None:
            tools, text, consent = None, None, False
        else:
            tools, text, consent = toolset.tools_json, toolset.instructions, toolset.consent
        self.seq += 1
        self.bus.send(subject, State(client_id, epoch, self.instance, tools, text, self.seq, consent))

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
        self.bus.send(subject, Sync(self.instance, self.seq, WIRE_VERSION, answer))
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
        self.forwarding.abandon_calls_from(None, now)

    def undeliverable(self, subject: str, message: Message, limit: int, now: float) -> None:
        """The bus cannot carry `message` (over `limit` bytes): its call fails with a tool error rather than waiting."""
        text = too_large_between_instances(limit)
        if type(message) is ToApp:  # a call for a remote app: it fails here
            call_id = decode_forwarded(message.message).id
            self.forwarding.answered(Error(message.client_id, call_id, text, Outcome.TOO_LARGE), now)
        elif type(message) is Result:  # an app's answer: the agent's instance gets the error instead
            self.bus.send(subject, Error(message.client_id, message.call_id, text, Outcome.TOO_LARGE))
        else:
            self.bridge.events.cluster_message_too_large(message.client_id, limit)

    def dropped_message(self, reason: str, now: float, detail: str = "") -> None:
        """A bus message not taken (`reason` in DROP_REASONS): counted, and logged at most once a minute per reason."""
        self.dropped[reason] += 1
        if now >= self._drop_warn_at[reason]:
            self._drop_warn_at[reason] = now + 60.0
            self.bridge.events.cluster_message_dropped(reason, detail)

    def receive(self, message: Message, now: float, age: float = 0.0) -> None:
        """One message from the bus (core/wire.py read and checked it), sent `age` seconds ago by its sender's clock."""
        if self.connected and now - self._beat_sent >= STALLED_AFTER:
            self._start_over(now)  # before anything of the backlog a stall left is acted on
        self._handlers[type(message)](message, now, age)

    # -- messages -------------------------------------------------------------------------------

    def _on_app_message(self, message: ToApp, now: float, age: float) -> None:
        """A call or cancel for an app held here, from an agent's instance."""
        origin = message.instance
        if origin in self.incompatible:
            return
        try:
            forwarded = decode_forwarded(message.message)
        except msgspec.DecodeError:
            self.dropped_message(MALFORMED, now, "a call that is not one")
            return
        if forwarded.type == "cancel":
            self.forwarding.cancel(origin, forwarded.id, now)
            return
        if forwarded.arguments is msgspec.UNSET:
            self.dropped_message(MALFORMED, now, "a call without arguments")
            return
        subject = self.instance_subject(origin)
        required = self.required.get(origin)
        if origin not in self.peers or (required is not None and message.floor < required):
            # docs/scaling.md, Calls that never run late: sent before its instance learned that we
            # had started over with it (or from one we took as gone), which failed it already.
            self.forwarding.refuse(message, forwarded, subject)
            return
        if required is not None:
            del self.required[origin]  # it has applied our SYNC: its later calls carry that floor
        held = self.local.get(message.client_id)
        # None: the connection the agent's instance meant is gone (replaced or closed).
        app = held[0] if held is not None and held[1] == message.epoch else None
        self.forwarding.call(message, forwarded, app, subject, now, age)

    def _on_answer(self, message: Result | Error, now: float, age: float) -> None:
        self.forwarding.answered(message, now)

    def _on_progress(self, message: Progress, now: float, age: float) -> None:
        self.forwarding.progress(message, now)

    def _on_authorize(self, message: Authorize, now: float, age: float) -> None:
        """Another instance's consent page asks an app held here (docs/scaling.md, Consent across instances)."""
        if not self.connected or message.instance in self.incompatible:
            return
        held = self.local.get(message.client_id)
        # None: the connection the page's instance meant is gone (replaced or closed).
        app = held[0] if held is not None and held[1] == message.epoch else None
        self.forwarding.authorize(message, app, self.instance_subject(message.instance), now)

    def _on_consent(self, message: Consent, now: float, age: float) -> None:
        if message.instance not in self.incompatible:
            self.forwarding.consented(message, now)

    def _on_cancel(self, message: Cancel, now: float, age: float) -> None:
        if not self.connected or message.instance in self.incompatible:
            return  # read before the bus went down: what it says of other instances is stale
        cancel_call(self.bridge, message.client_id, message.request_id, message.session, now)

    def _on_state(self, message: State, now: float, age: float) -> None:
        if not self.connected or message.instance in self.incompatible:
            return
        self._apply_state(
            message.client_id,
            message.epoch,
            message.instance,
            message.tools,
            message.instructions,
            message.seq,
            message.consent,
            now,
        )

    def _on_gone(self, message: Gone, now: float, age: float) -> None:
        client_id, epoch, instance = message.client_id, message.epoch, message.instance
        if not self.connected or instance == self.instance or message.seq < self.floors.get(instance, 0):
            return
        if instance in self.incompatible:
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
        app = self.forwarding.remote.get(client_id)
        if app is not None and app.epoch == epoch and app.instance == instance:
            self.forwarding.drop(app, now)
        self._promote(client_id, now)

    def _from_peer(self, message: Beat | Sync, now: float) -> bool:
        """Whether a BEAT or SYNC is to be acted on: connected, from another instance, of our wire version."""
        if not self.connected or message.instance == self.instance:
            return False
        if message.wire_version != WIRE_VERSION:
            self._incompatible(message.instance, message.wire_version, now)
            return False
        return True

    def _on_beat(self, message: Beat, now: float, age: float) -> None:
        if not self._from_peer(message, now):
            return
        instance = message.instance
        known = instance in self.peers
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

    def _on_sync(self, message: Sync, now: float, age: float) -> None:
        if not self._from_peer(message, now):
            return
        instance = message.instance
        if message.seq < self.floors.get(instance, 0):
            return  # an older SYNC, delivered after a newer one (docs/scaling.md, Ordering)
        self.peers[instance] = now
        self.floors[instance] = message.seq
        # It starts over (it joined, its bus came back, or it answers ours): it forgot our
        # apps and failed its calls to them, so the ones we run for it end too (the app
        # gets `cancel`); what we knew of its apps is replaced by the states that follow.
        self.silent.discard(instance)
        self.forwarding.abandon_calls_from(instance, now)
        self._forget_apps_of(instance, now, message.seq)
        if message.answer:
            self._owe(instance, False, now)

    def _owe_states(self, instance: str, now: float) -> None:
        """The states of our apps to an instance that lost nothing of ours, within ANSWER_EVERY."""
        if now - self._answered.get(instance, -math.inf) < ANSWER_EVERY:
            return  # answered within the second: it has them
        self._answered[instance] = now
        subject = self.instance_subject(instance)
        for client_id, (app, epoch) in list(self.local.items()):
            self._send_state(subject, client_id, app, epoch)

    def _incompatible(self, instance: str, version: int, now: float) -> None:
        """An instance announced another WIRE_VERSION: it is ignored from now on, with one warning."""
        if instance in self.incompatible:
            return
        self.incompatible[instance] = version
        self.bridge.events.cluster_wire_mismatch(instance, version, WIRE_VERSION)
        if instance in self.peers:
            self._peer_gone(instance, now)

    def _apply_state(
        self,
        client_id: str,
        epoch: int,
        instance: str,
        tools: bytes | None,
        text: str | None,
        seq: int,
        consent: bool | None,
        now: float,
    ) -> None:
        if instance == self.instance or seq < self.floors.get(instance, 0):
            return
        ended = self.ended.get(client_id)
        if ended is not None and ended[0] == epoch and ended[1] == instance:
            return  # that connection's GONE came first
        if instance not in self.peers:
            self.peers[instance] = now
        if epoch > self.clock and self.clock < CLOCK_CEILING:
            self.clock = min(epoch, CLOCK_CEILING)
        claim = (epoch, instance)
        current = self.claims.get(client_id)
        forwarding = self.forwarding
        if current is None or claim > current:
            # A newer connection for this ID, elsewhere: it holds the ID from now on; the bridge
            # closes the one it replaces with 4409 if that one is here (ClientMCP v1 §3.1).
            self.claims[client_id] = claim
            replaced = self.local.pop(client_id, None)
            if replaced is not None:  # its end, so that no instance keeps it as a runner-up
                self.seq += 1
                self.bus.send(
                    self.app_subject(client_id), Gone(client_id, replaced[1], self.instance, self.seq)
                )
            subject = self.instance_subject(instance)
            forwarding.hold(RemoteApp(forwarding, client_id, instance, epoch, seq, subject), now)
        elif claim != current:
            # Older than the connection in use, whose instance closes it; unless that one ended
            # unseen (its instance restarted, with a clock behind): kept to take over then.
            if instance != current[1]:
                runner = self.runners_up.get(client_id)
                if runner is None or claim >= (runner[0], runner[1]):
                    self.runners_up[client_id] = (epoch, instance, tools, text, seq, consent)
            return
        app = forwarding.remote.get(client_id)
        if app is None or app.epoch != epoch:
            return
        if seq < app.seq:
            return  # an older state of this connection, delivered after a newer one
        app.seq = seq
        app.consent = consent
        if tools is not None:
            forwarding.retool(app, tools, text, now)

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
            self.bus.send(self.beat_subject, Beat(self.instance, WIRE_VERSION))
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
        self.bridge.events.cluster_stalled(now - self._beat_sent)
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
        self.forwarding.abandon_calls_from(instance, now)
        self._forget_apps_of(instance, now)

    def _forget_apps_of(self, instance: str, now: float, before: int = MAX_INTEGER + 1) -> None:
        """`instance`'s apps are offline here; those it stated after sequence `before` stay (a SYNC delivered late)."""
        runners_up = self.runners_up
        if runners_up:
            for client_id, runner in list(runners_up.items()):
                if runner[1] == instance and runner[4] < before:
                    del runners_up[client_id]
        for app in self.forwarding.forget_apps_of(instance, now, before):
            client_id = app.client_id
            if self.claims.get(client_id) == (app.epoch, instance):
                del self.claims[client_id]
            if runners_up:
                self._promote(client_id, now)

    def _promote(self, client_id: str, now: float) -> None:
        """The claim on `client_id` ended: a connection elsewhere that had lost to it takes the ID."""
        runner = self.runners_up.pop(client_id, None)
        if runner is not None and runner[1] in self.peers and client_id not in self.claims:
            epoch, instance, tools, text, seq, consent = runner
            self._apply_state(client_id, epoch, instance, tools, text, seq, consent, now)
