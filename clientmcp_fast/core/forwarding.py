"""Calls between the instances of a cluster: apps held elsewhere, and calls run here for agents elsewhere.

An app connected to another instance stands in the bridge's `apps` as a `RemoteApp`, an
`App` (core/apps.py) whose `send` forwards the bridge's `call` and `cancel` to the
instance holding it; what that instance answers comes back to `Forwarding.answered`. A call
an agent made on another instance runs here as a `ForwardedCall`, whose end goes back. So a
tools/call, its timeout, streaming, cancellation and every outcome run through the same
`Bridge` code as a local call.

Which instance holds an app (docs/scaling.md, Replacement), and which instances may still
call (docs/scaling.md, Calls that never run late), is the directory's (core/directory.py):
it tells this module which apps to hold and which calls to refuse.

Consent works the same way (docs/scaling.md, Consent across instances): a consent page shown
here for a remote app keeps its request in this bridge's `consents` and sends the app's
instance AUTHORIZE; that instance asks the app, and sends back CONSENT with its answer, or
at once with why it could not ask.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import msgspec

from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.consent import EARLIER_RELEASE, NOT_ASKING, NOT_CONNECTED, too_many_waiting
from clientmcp_fast.core.jsonrpc import encode_json
from clientmcp_fast.core.outcomes import TOOLS_NOT_KEPT, Outcome, timed_out
from clientmcp_fast.core.progress import Progress, Report
from clientmcp_fast.core.register import RegisterError, ToolSet, parse_register
from clientmcp_fast.core.tracing import valid_traceparent, valid_tracestate
from clientmcp_fast.core.wire import Authorize, Error, Result, ToApp
from clientmcp_fast.core.wire import Consent as ConsentMessage
from clientmcp_fast.core.wire import Progress as ProgressMessage
from clientmcp_fast.speedups import result_shape

if TYPE_CHECKING:
    from clientmcp_fast.core.apps import App
    from clientmcp_fast.core.bridge import Bridge
    from clientmcp_fast.core.directory import Bus

# The other side checked the register against its own limit already.
_ANY_NUMBER = 1 << 30
# A remote app's calls carry the agent's trace context, and read its progress token, whatever
# the app registered: its own instance, which knows, passes them on or not
# (docs/scaling.md, Progress and trace context).
_TRUE = msgspec.Raw(b"true")


class Forwarded(msgspec.Struct, gc=False):
    """A `call` or `cancel` the bridge wrote for a remote app, read back on the app's instance."""

    type: str
    id: str
    name: str | msgspec.UnsetType = msgspec.UNSET
    arguments: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    # The agent's trace context (docs/protocol.md, Trace context), checked again where it is read.
    traceparent: str | msgspec.UnsetType = msgspec.UNSET
    tracestate: str | msgspec.UnsetType = msgspec.UNSET


decode_forwarded = msgspec.json.Decoder(Forwarded).decode


class RemoteApp:
    """An app connected to another instance: the bridge's `App` (core/apps.py), which forwards what it is sent."""

    __slots__ = (
        "forwarding",
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
        "consent",
    )

    def __init__(
        self, forwarding: Forwarding, client_id: str, instance: str, epoch: int, seq: int, subject: str
    ) -> None:
        self.forwarding = forwarding
        self.subject = subject  # its instance's, where its calls go
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
        # Whether it registered `consent: true`, as its instance's latest STATE said; None: that
        # instance's release cannot ask it for a page shown here (docs/scaling.md, Consent across instances).
        self.consent: bool | None = None

    def send(self, message: bytes) -> None:
        """A `call` or `cancel` the bridge wrote for this app: to its instance."""
        forwarding = self.forwarding
        forwarding.bus.send(
            self.subject,
            ToApp(
                forwarding.instance,
                self.client_id,
                self.epoch,
                message,
                forwarding.timeout_ms,
                forwarding.floors.get(self.instance, 0),
            ),
        )

    def close(self, code: int, reason: str, now: float) -> None:
        """Replaced (or the bridge ends): its calls fail now; the connection is closed where it is."""
        self.forwarding.drop(self, now)

    def call_ended(self, call: Call, outcome: int) -> None:
        """A call to this app ended: counted as forwarded (docs/operations.md, Metrics)."""
        # A call over 4 MiB is refused by the bridge before it is sent, as for a local app: it
        # never left this instance, so it is not forwarded. The only too_large of a forwarded
        # call is the bus's refusal, counted where its ERROR is read (`Forwarding.answered`).
        if outcome != Outcome.TOO_LARGE:
            self.forwarding.bridge.counters.forwarded[outcome] += 1

    def unregistered_text(self) -> str:
        """The tool error while its tools are unknown here: not registered, or not kept for the bound."""
        return TOOLS_NOT_KEPT if self.over_bound else Outcome.NOT_REGISTERED.text

    def ask_consent(self, request_id: str, client_name: str | None, client_uri: str, code: str) -> str | None:
        """Send its instance AUTHORIZE if it asks for consent; None when sent, else why it cannot be asked."""
        consent = self.consent
        if not consent:
            # Known here at once, as for an app of this instance: no round trip to find out.
            return EARLIER_RELEASE if consent is None else NOT_ASKING
        forwarding = self.forwarding
        forwarding.bus.send(
            self.subject,
            Authorize(
                self.client_id, self.epoch, forwarding.instance, request_id, client_name, client_uri, code
            ),
        )
        return None


class ForwardedCall(Call):
    """A call an agent made on another instance, run here on the local app; its end goes back."""

    __slots__ = ("forwarding", "origin", "origin_id", "subject", "outcome")

    def __init__(
        self, forwarding: Forwarding, origin: str, origin_id: str, client_id: str, subject: str
    ) -> None:
        self.init_call(False)  # the agent's instance streams, not this one
        # The agent's instance, which owns the call, writes its log line; here it is counted in
        # the cluster's metrics only (docs/operations.md, Log events).
        self.logged = False
        self.forwarding = forwarding
        self.origin = origin
        self.origin_id = origin_id
        self.client_id = client_id
        self.subject = subject  # the agent's instance's
        self.outcome = Outcome.RESULT  # how it ended, set before `call_error` (`ended`)

    def ended(self, outcome: int) -> None:
        """Counted as served (docs/operations.md, Metrics); its ERROR tells the agent's instance how it ended."""
        self.outcome = outcome
        self.forwarding.bridge.counters.served[outcome] += 1

    def _reply(self, message: Result | Error) -> None:
        forwarding = self.forwarding
        forwarding.running.pop((self.origin, self.origin_id), None)
        forwarding.bus.send(self.subject, message)

    def call_result(self, result: bytes, has_result_type: bool) -> None:
        self._reply(Result(self.client_id, self.origin_id, bytes(result), has_result_type))

    def call_error(self, text: str) -> None:
        self._reply(Error(self.client_id, self.origin_id, text, self.outcome))

    def call_progress(self, report: Report) -> None:
        """The app's report, paced here too: to the agent's instance, which has the agent's token."""
        self.forwarding.bus.send(
            self.subject,
            ProgressMessage(self.client_id, self.origin_id, report.progress, report.total, report.message),
        )

    def call_slow(self) -> None:  # pragma: no cover - never wants a stream
        pass

    def call_tick(self) -> None:  # pragma: no cover
        pass

    def refuse(self, outcome: Outcome, text: str | None = None) -> None:
        """It never reaches the app here: served with `outcome`, its agent told `text`, else the outcome's."""
        self.ended(outcome)
        self.call_error(outcome.text if text is None else text)


class Forwarding:
    """This instance's side of the calls crossing instances: the apps held elsewhere, the calls run here for others."""

    def __init__(self, bridge: Bridge, bus: Bus, instance: str, floors: dict[str, int]) -> None:
        self.bridge = bridge
        self.bus = bus
        self.instance = instance
        self.timeout_ms = int(
            bridge.limits.call_timeout * 1000
        )  # sent with each call (Calls that never run late)
        # Per instance, the sequence of its latest SYNC applied here: the directory's, sent with
        # each call (docs/scaling.md, Calls that never run late).
        self.floors = floors
        self.remote: dict[str, RemoteApp] = {}  # client ID -> the app held elsewhere the bridge has
        self.running: dict[tuple[str, str], ForwardedCall] = {}  # (origin, its call ID) -> the call here
        # docs/scaling.md, Apps held elsewhere: how many remote apps' tool sets are kept here.
        self.kept = 0
        self.max_kept = bridge.limits.max_remote_apps
        self.not_kept = 0  # times an app's tools were not kept for the bound (a metric)
        self._warn_at = -math.inf

    # -- apps held elsewhere -------------------------------------------------------------------

    def hold(self, app: RemoteApp, now: float) -> None:
        """A connection elsewhere holds its client ID: the bridge's app for it from now on."""
        self.bridge.hold(app, now)  # closes the app it replaces, which may be a remote one
        self.remote[app.client_id] = app

    def drop(self, app: RemoteApp, now: float) -> None:
        """A remote app leaves the bridge (gone, replaced, unreachable): its calls fail now."""
        client_id = app.client_id
        if self.remote.get(client_id) is app:
            del self.remote[client_id]
        if app.kept:
            app.kept = False
            self.kept -= 1
        self.bridge.forget(app, now)

    def is_remote(self, app: App) -> bool:
        """Whether `app` is the bridge's app held by another instance."""
        return self.remote.get(app.client_id) is app

    def retool(self, app: RemoteApp, tools: bytes, text: str | None, now: float) -> None:
        """A remote app's tools, kept within the bound of docs/scaling.md, Apps held elsewhere."""
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
                progress=_TRUE,
                trace=_TRUE,
            )
        except RegisterError:  # pragma: no cover - the app's instance accepted it
            return
        self.bridge.retool(app, toolset)

    def _not_kept(self, app: RemoteApp, now: float) -> None:
        """The bound of remote apps is reached: this one is known to be online, without its tools."""
        if not app.over_bound:
            app.over_bound = True
            self.not_kept += 1
        if now >= self._warn_at:  # at most a line a minute, however many apps are over
            self._warn_at = now + 60.0
            self.bridge.events.cluster_apps_not_kept(self.max_kept)

    def forget_apps_of(self, instance: str, now: float, before: int) -> list[RemoteApp]:
        """`instance`'s apps held here stated before sequence `before` leave the bridge; those apps."""
        gone = [app for app in self.remote.values() if app.instance == instance and app.seq < before]
        for app in gone:
            self.drop(app, now)
        return gone

    def answered(self, message: Result | Error, now: float) -> None:
        """The app's instance answered a call to a remote app: the agent here gets it."""
        app = self.remote.get(message.client_id)
        if app is None:
            return
        call = app.calls.pop(message.call_id, None)
        if call is None:
            return  # timed out, cancelled or failed already
        if type(message) is Result:
            # Its shape is read again (a walk of bytes the app's instance checked), so that
            # this instance, which owns the call, counts a tool error from the app as one.
            result = msgspec.Raw(message.result)
            self.bridge.complete(call, result, result_shape(result), now)
            return
        outcome = Outcome(message.outcome)  # one of them: core/wire.py reads no other
        if outcome == Outcome.TOO_LARGE:  # the call or its answer was too large for the bus
            self.bridge.counters.forwarded[outcome] += 1
        self.bridge.fail(call, outcome, now, message.text)

    def progress(self, message: ProgressMessage, now: float) -> None:
        """The app's instance passed on a progress report of a call to a remote app: for the agent here."""
        app = self.remote.get(message.client_id)
        call = app.calls.get(message.call_id) if app is not None else None
        if call is not None:  # else it ended already
            self.bridge.progress(call, Report(message.progress, message.total, message.message), now)

    def consented(self, message: ConsentMessage, now: float) -> None:
        """A remote app's instance passed on its answer to a page shown here, or why it could not ask it."""
        consents = self.bridge.consents
        consent = consents.get(message.request_id, now)
        if consent is None:
            return  # ended already, or never shown here
        app = consent.app
        # Only the connection that was asked answers, as for an app of this instance.
        if (
            type(app) is not RemoteApp
            or app.instance != message.instance
            or app.epoch != message.epoch
            or app.client_id != message.client_id
        ):
            return
        consents.heard(consent, message.allow, message.problem)

    # -- consent pages elsewhere for apps held here ---------------------------------------------

    def authorize(self, message: Authorize, app: App | None, subject: str, now: float) -> None:
        """Another instance's consent page asks `app` (None: the connection it meant is gone); the end goes back."""
        client_id, epoch, instance = message.client_id, message.epoch, self.instance
        bus = self.bus

        def reply(allow: bool, problem: str | None) -> None:
            bus.send(subject, ConsentMessage(client_id, epoch, instance, message.request_id, allow, problem))

        if app is None:
            reply(False, NOT_CONNECTED)
            return
        consents = self.bridge.consents
        relayed = consents.relay(message.request_id, client_id, app, reply, now)
        if relayed is None:
            reply(False, too_many_waiting(consents.max_per_app))
            return
        problem = app.ask_consent(message.request_id, message.client_name, message.client_uri, message.code)
        if problem is not None:
            consents.end_relayed(relayed)
            reply(False, problem)

    # -- calls run here for agents elsewhere ---------------------------------------------------

    def refuse(self, message: ToApp, forwarded: Forwarded, subject: str) -> None:
        """A `call` sent before its instance learned that we had started over with it: failed there already."""
        ForwardedCall(self, message.instance, forwarded.id, message.client_id, subject).refuse(
            Outcome.DISCONNECTED
        )

    def call(
        self, message: ToApp, forwarded: Forwarded, app: App | None, subject: str, now: float, age: float
    ) -> None:
        """A `call` for `app` (None: the connection the agent's instance meant is gone), sent `age` seconds ago."""
        call = ForwardedCall(self, message.instance, forwarded.id, message.client_id, subject)
        timeout = message.timeout_ms / 1000
        if age >= timeout:  # its agent was told of the timeout already
            call.refuse(Outcome.TIMEOUT, timed_out(timeout))
            return
        if app is None:
            call.refuse(Outcome.DISCONNECTED)
            return
        toolset = app.toolset
        tool = toolset.tools.get(forwarded.name) if toolset is not None else None
        if tool is None:
            if toolset is None:
                call.refuse(Outcome.NOT_REGISTERED)
            else:
                call.refuse(Outcome.UNKNOWN_TOOL, f"Unknown tool: {forwarded.name}")
            return
        arguments = forwarded.arguments
        if toolset.progress:
            call.progress = Progress(None)  # reports go back; the agent's instance drops them if unasked
        if forwarded.traceparent is not msgspec.UNSET:
            call.traceparent = valid_traceparent(forwarded.traceparent)
            if call.traceparent is not None and forwarded.tracestate is not msgspec.UNSET:
                call.tracestate = valid_tracestate(forwarded.tracestate)
        call.tool = tool  # what a tracer names its span by (clientmcp_fast/otel.py)
        self.running[(message.instance, forwarded.id)] = call
        self.bridge.start_call(app, tool, bytes(arguments), call, now)  # type: ignore[arg-type]

    def cancel(self, origin: str, call_id: str, now: float) -> None:
        """A `cancel` from the agent's instance: the call it names ends at the app."""
        call = self.running.pop((origin, call_id), None)
        if call is not None:
            self.bridge.abandon(call, now)

    def abandon_calls_from(self, instance: str | None, now: float) -> None:
        """The calls run here for `instance`'s agents (every instance's: None) end: the apps get `cancel`."""
        bridge = self.bridge
        for key, call in list(self.running.items()):
            if instance is None or key[0] == instance:
                del self.running[key]
                bridge.abandon(call, now)
