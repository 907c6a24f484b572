"""The bridge's whole state: online apps by client ID, calls in flight, agents' notification streams.

No sockets and no clock: the I/O layer passes `now`, asks `next_deadline()` when to call
`on_timer()`, and is told through `wake(when)` whenever an earlier deadline appears.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from clientmcp_fast.core.apps import LOCAL, NO_CALLS, AppRouter
from clientmcp_fast.core.calls import Call, InFlightCalls
from clientmcp_fast.core.consent import ConsentRequests
from clientmcp_fast.core.counters import Counters
from clientmcp_fast.core.events import EventLog
from clientmcp_fast.core.jsonrpc import encode_json
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES, Limits
from clientmcp_fast.core.messages import cancel_message
from clientmcp_fast.core.outcomes import Outcome, timed_out
from clientmcp_fast.core.progress import Report
from clientmcp_fast.core.register import EMPTY_TOOLSET, Tool, ToolSet
from clientmcp_fast.core.tokens import TokenVerifier
from clientmcp_fast.core.tracing import CallTracing
from clientmcp_fast.speedups import SHAPE_ERROR, SHAPE_TYPED, call_message, traced_call_message

if TYPE_CHECKING:
    import msgspec

    from clientmcp_fast.core.apps import App

# docs/protocol.md, Notification streams: get an SSE comment this often.
NOTIFICATION_KEEPALIVE_SECONDS = 15.0

# The outcomes of an answered call, bound once: a member looked up through its enum class is
# slow, and one of these is read per call.
_RESULT = Outcome.RESULT
_TOOL_ERROR = Outcome.TOOL_ERROR


class NotificationStream(Protocol):
    """An agent's open notification stream for one client ID (the agent endpoint implements it)."""

    def tools_changed(self) -> None:
        """Send notifications/tools/list_changed."""

    def keep_alive(self) -> None:
        """Send an SSE comment, so that proxies keep the stream open."""

    def end(self) -> None:
        """The bridge ends the stream on its own (shutdown)."""


class Bridge:
    """Online apps by client ID, their tool sets and calls, and who listens for changes."""

    __slots__ = (
        "limits",
        "verifier",
        "max_app_connections",
        "_max_calls_per_app",
        "apps",
        "app_connections",
        "calls",
        "streams",
        "stream_count",
        "shutting_down",
        "_wake",
        "_sweep_every",
        "_sweep_at",
        "_streams_tick_at",
        "_announcing",
        "router",
        "counters",
        "events",
        "max_calls_per_token",
        "new_session_id",
        "consents",
        "tracing",
        "_progress_waiting",
    )

    def __init__(
        self,
        limits: Limits,
        verifier: TokenVerifier,
        wake: Callable[[float], None],
        max_app_connections: int | None = None,
        *,
        new_session_id: Callable[[], bytes],
        events: EventLog | None = None,
        tracing: CallTracing | None = None,
    ) -> None:
        self.limits = limits
        self.verifier = verifier
        self.max_app_connections = max_app_connections or limits.max_app_connections or 1_000_000
        self._max_calls_per_app = limits.max_calls_per_app
        # Every app an agent here can reach, by client ID: connected here, or held by another
        # instance of a cluster (core/apps.py).
        self.apps: dict[str, App] = {}
        self.app_connections = 0  # every app connection, until its transport is gone
        self.calls = InFlightCalls(limits.call_timeout)
        self.streams: dict[str, set[NotificationStream]] = {}
        self.stream_count = 0
        self.shutting_down = False
        self._wake = wake
        # Idle and congested apps are found by a sweep rather than a timer per app: an idle
        # app then costs no timer work at all, and a sweep is a short walk of a dict.
        self._sweep_every = max(0.01, min(5.0, min(limits.app_idle_timeout, limits.app_soft_seconds) / 16))
        self._sweep_at: float | None = None
        self._streams_tick_at: float | None = None
        # Client IDs whose tool set changed since the last timer: their streams hear of it once
        # per turn of the loop, however many registers the turn read (else a burst of registers
        # to many streams is a write per register and stream in one turn, stalling every other
        # client: docs/benchmarks.md, Register bursts).
        self._announcing: set[str] = set()
        # Where apps live beyond this process (core/apps.py): told of each local connection that
        # takes, registers or leaves a client ID, never called per call. A cluster's directory
        # replaces the single process's, which has nothing to tell.
        self.router: AppRouter = LOCAL
        self.counters = Counters()  # read by the metrics collector (docs/operations.md)
        # What is logged (core/events.py): the I/O side's event log; the base class logs nothing.
        self.events = events if events is not None else EventLog()
        self.max_calls_per_token = limits.agent_max_calls  # 0: no limit (docs/configuration.md)
        # A fresh random MCP session id, from the I/O side: the core reads no random source.
        self.new_session_id = new_session_id
        # OAuth requests whose consent page this process showed, waiting for their app (docs/oauth.md).
        self.consents = ConsentRequests()
        # Tells a tracer of each call (core/tracing.py); None when the bridge does not trace.
        self.tracing = tracing
        # Calls with a progress report held back by the pace of core/progress.py, by sequence.
        self._progress_waiting: dict[int, Call] = {}

    # -- apps connected here (the I/O layer's calls) ------------------------------------------

    def attach(self, app: App, now: float) -> None:
        """A connection here proved it may be `app.client_id`; the newest one wins (ClientMCP v1 §3.1)."""
        self._hold(app, now)
        self.router.attached(app, now)

    def registered(self, app: App, toolset: ToolSet) -> None:
        """An accepted register of an app connected here replaced its tool set (ClientMCP v1 §3.2)."""
        if self._retool(app, toolset):
            self.router.registered(app)

    def detach(self, app: App, now: float) -> None:
        """The connection of an app here is ending: its calls fail now, its tools disappear (ClientMCP v1 §5.3)."""
        if self._drop(app, now):
            self.router.detached(app)

    # -- apps held by another instance (the router's calls) ------------------------------------

    def hold(self, app: App, now: float) -> None:
        """An app held elsewhere takes its client ID here too (core/directory.py)."""
        self._hold(app, now)

    def retool(self, app: App, toolset: ToolSet) -> None:
        """An app held elsewhere has a new tool set."""
        self._retool(app, toolset)

    def forget(self, app: App, now: float) -> None:
        """An app held elsewhere is gone, or no longer reachable from here: its calls fail now."""
        self._drop(app, now)

    def _hold(self, app: App, now: float) -> None:
        client_id = app.client_id
        older = self.apps.get(client_id)
        self.apps[client_id] = app
        if older is not None:
            older.close(4409, "replaced by a newer connection for this client ID", now)
            if older.toolset is not None and older.toolset.tools:
                self._announce(client_id)
        if self._sweep_at is None:
            self._sweep_at = now + self._sweep_every
            self._wake(self._sweep_at)

    def _retool(self, app: App, toolset: ToolSet) -> bool:
        """Set the app's tool set; True when it is the app holding its client ID."""
        previous = app.toolset or EMPTY_TOOLSET
        app.toolset = toolset
        if self.apps.get(app.client_id) is not app:
            return False
        if not toolset.same_tools(previous):
            self._announce(app.client_id)
        return True

    def _drop(self, app: App, now: float) -> bool:
        """Fail the app's calls and remove it; True when it held its client ID."""
        if app.calls:
            calls = list(app.calls.values())
            app.calls.clear()
            # A newer connection took the ID (4409) when it is no longer this app's.
            why = Outcome.DISCONNECTED if self.apps.get(app.client_id) is app else Outcome.REPLACED
            for call in calls:
                self.fail(call, why, now)
        client_id = app.client_id
        if self.apps.get(client_id) is not app:
            return False
        del self.apps[client_id]
        if app.toolset is not None and app.toolset.tools:
            self._announce(client_id)
        return True

    # -- calls ------------------------------------------------------------------------------

    def complete(self, call: Call, result: msgspec.Raw, shape: int, now: float) -> None:
        """The app answered a call in flight (already removed from the app's calls); `shape` is its result_shape."""
        self.calls.finish(call)
        self._ended(call, _TOOL_ERROR if shape & SHAPE_ERROR else _RESULT, now)
        progress = call.progress
        if progress is not None and progress.pending is not None:
            call.call_progress(progress.flush())  # the latest report goes before the answer
        call.call_result(result, shape & SHAPE_TYPED != 0)  # type: ignore[arg-type]

    def fail(self, call: Call, outcome: Outcome, now: float, text: str | None = None) -> None:
        """A call in flight (already removed from its app's calls) ended unanswered; the agent is told why.

        `text` is the tool error, by default the outcome's own (`Outcome.text`).
        """
        self.calls.finish(call)
        self._ended(call, outcome, now)
        call.call_error(outcome.text if text is None else text)

    def start_call(self, app: App, tool: Tool, arguments: bytes, call: Call, now: float) -> bool:
        """Send `call` to the app; False when it failed at once (and the call was told why)."""
        if self.shutting_down:
            self.refused_call(call, Outcome.SHUTTING_DOWN)
            call.call_error(Outcome.SHUTTING_DOWN.text)
            return False
        calls = app.calls
        if len(calls) >= self._max_calls_per_app or app.congested_since is not None:
            self.refused_call(call, Outcome.BUSY)
            call.call_error(Outcome.BUSY.text)
            return False
        grant = call.grant
        if grant is not None:
            grant.in_flight += 1  # back down in `_ended`, however the call ends
        self.counters.calls_started += 1
        wake = self.calls.start(call, app, now)
        tracing = self.tracing
        if tracing is not None:
            tracing.started(call)
        traceparent = call.traceparent
        if traceparent is not None and app.toolset.trace:
            # W3C allows quotes and backslashes in a tracestate's values: it goes as a JSON string.
            tracestate = call.tracestate
            state = b"" if tracestate is None else encode_json(tracestate)
            message = traced_call_message(call.id.encode(), tool.wire_name, arguments, traceparent, state)
        else:
            message = call_message(call.id.encode(), tool.wire_name, arguments)
        if len(message) > MAX_MESSAGE_BYTES:
            self.fail(call, Outcome.TOO_LARGE, now)
            return False
        if calls is NO_CALLS:
            calls = app.calls = {}
        calls[call.id] = call
        app.send(message)
        if wake is not None:
            self._wake(wake)
        return True

    def abandon(self, call: Call, now: float) -> None:
        """The agent no longer wants the answer (it hung up or cancelled): tell the app."""
        app = call.app
        if app.calls.pop(call.id, None) is None:
            return  # already answered, failed or timed out
        self.calls.finish(call)
        self._ended(call, Outcome.CANCELLED, now)
        app.send(cancel_message(call.id.encode()))

    def _ended(self, call: Call, outcome: int, now: float) -> None:
        # Every call sent to an app ends here once; its start is its deadline less the timeout.
        # (Compiled, the three are C doubles: no float object is made per call.)
        grant = call.grant
        if grant is not None:
            grant.in_flight -= 1
        deadline = call.deadline
        timeout = self.calls.timeout
        seconds = now - deadline + timeout
        self.counters.call_ended(outcome, seconds, call.streaming)
        self.events.call_ended(call, outcome, seconds)
        tracing = self.tracing
        if tracing is not None:
            tracing.ended(call, outcome)
        call.ended(outcome)
        call.app.call_ended(call, outcome)

    def refused_call(self, call: Call, outcome: int) -> None:
        """A tools/call answered without reaching an app (offline, no register, unknown tool, busy)."""
        self.counters.calls_ended[outcome] += 1
        self.events.call_ended(call, outcome, 0.0)
        tracing = self.tracing
        if tracing is not None:
            tracing.ended(call, outcome)
        call.ended(outcome)

    def progress(self, call: Call, report: Report, now: float) -> None:
        """The app reported progress on a call in flight: to whoever waits, at the pace of core/progress.py."""
        progress = call.progress
        if progress is None:
            return  # nobody asked for it
        if progress.take(report, now):
            self._report(call, report, now)
        elif progress.pending is not None and call.seq not in self._progress_waiting:
            self._progress_waiting[call.seq] = call
            self._wake(progress.next_at())

    def _report(self, call: Call, report: Report, now: float) -> None:
        if call.wants_stream and not call.streaming:
            self.calls.stream_now(call, now)  # progress needs the stream: it starts at once
        call.call_progress(report)

    def refused_agent(self, reason: int, client_id: str, now: float) -> None:
        """An agent was refused for its token's scope or limits: counted, and told to the event log."""
        self.counters.refusals[reason] += 1
        self.events.agent_refused(reason, client_id, now)

    # -- notification streams ---------------------------------------------------------------

    def add_stream(self, client_id: str, stream: NotificationStream, now: float) -> bool:
        """Start announcing `client_id`'s tool changes to `stream`; False when a limit is reached."""
        streams = self.streams.get(client_id)
        if self.stream_count >= self.limits.max_streams or (
            streams is not None and len(streams) >= self.limits.max_streams_per_client
        ):
            return False
        if streams is None:
            streams = self.streams[client_id] = set()
        streams.add(stream)
        self.stream_count += 1
        if self._streams_tick_at is None:
            self._streams_tick_at = now + NOTIFICATION_KEEPALIVE_SECONDS
            self._wake(self._streams_tick_at)
        return True

    def remove_stream(self, client_id: str, stream: NotificationStream) -> None:
        """Stop announcing to `stream` (the agent went away, or the stream ended)."""
        streams = self.streams.get(client_id)
        if streams is not None and stream in streams:
            streams.discard(stream)
            self.stream_count -= 1
            if not streams:
                del self.streams[client_id]

    def _announce(self, client_id: str) -> None:
        if client_id in self.streams:
            first = not self._announcing
            self._announcing.add(client_id)
            if first:
                self._wake(-math.inf)  # at once: as soon as this turn's other work is done

    def _tell_streams(self) -> None:
        announcing, self._announcing = self._announcing, set()
        for client_id in announcing:
            for stream in list(self.streams.get(client_id, ())):
                self.counters.list_changed_sent += 1
                stream.tools_changed()

    # -- time -------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When `on_timer` next has work to do, or None; -inf for at once."""
        if self._announcing:
            return -math.inf
        best = self.calls.next_deadline()
        for call in self._progress_waiting.values():
            when = call.progress.next_at()
            if best is None or when < best:
                best = when
        for when in (self._sweep_at, self._streams_tick_at):
            if when is not None and (best is None or when < best):
                best = when
        return best

    def on_timer(self, now: float) -> None:
        """Do whatever is due at `now`: changes to announce, timeouts, streaming switches, keep-alives, idle apps."""
        if self._announcing:
            self._tell_streams()
        for call in self.calls.on_timer(now):
            app = call.app
            del app.calls[call.id]
            app.send(cancel_message(call.id.encode()))
            self._ended(call, Outcome.TIMEOUT, now)
            call.call_error(timed_out(self.limits.call_timeout))
        if self._progress_waiting:
            self._send_waiting_progress(now)
        if self._sweep_at is not None and now >= self._sweep_at:
            self._sweep_apps(now)
        if self._streams_tick_at is not None and now >= self._streams_tick_at:
            self._streams_tick_at = now + NOTIFICATION_KEEPALIVE_SECONDS if self.stream_count else None
            for streams in list(self.streams.values()):
                for stream in list(streams):
                    stream.keep_alive()

    def _send_waiting_progress(self, now: float) -> None:
        waiting = self._progress_waiting
        for seq, call in list(waiting.items()):
            progress = call.progress
            if progress.pending is None or call.id not in call.app.calls:
                del waiting[seq]  # passed by a later report, or the call ended: nothing to send
                continue
            report = progress.due(now)
            if report is not None:
                del waiting[seq]
                self._report(call, report, now)

    def _sweep_apps(self, now: float) -> None:
        idle = self.limits.app_idle_timeout
        congested_for = self.limits.app_soft_seconds
        for app in list(self.apps.values()):
            if now - app.last_seen >= idle:
                app.close(4408, f"nothing received for {idle:g} s", now)
            elif app.congested_since is not None and now - app.congested_since >= congested_for:
                app.close(
                    4429,
                    f"the app does not read: unsent data above the soft limit for {congested_for:g} s",
                    now,
                )
        self._sweep_at = now + self._sweep_every if self.apps else None

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self, now: float) -> None:
        """Graceful end (docs/protocol.md, Shutdown): fail every call, close every app with 1001, end streams."""
        self.shutting_down = True
        for call in self.calls:
            call.app.calls.pop(call.id, None)
            self.fail(call, Outcome.SHUTTING_DOWN, now)
        for app in list(self.apps.values()):
            app.close(1001, "bridge shutting down", now)
        for client_id, streams in list(self.streams.items()):
            for stream in list(streams):
                self.remove_stream(client_id, stream)
                stream.end()
