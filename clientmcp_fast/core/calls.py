"""Calls in flight and their deadlines: the timeout, the switch to streaming, the keep-alive ticks.

Every call has the same timeout and the same streaming delay, so start order is
deadline order: one insertion-ordered dict gives the next deadline in O(1) and lets a
call leave in O(1) when it ends, without a heap or a timer per call. Calls that are
streamed (rare: they last over a second) are kept apart for their keep-alive ticks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clientmcp_fast.core.apps import App
    from clientmcp_fast.core.progress import Progress, Report
    from clientmcp_fast.core.tokens import Grant

# ClientMCP v1 §4.3: a call still running after a second is answered as an SSE stream, with an
# SSE comment every second until the answer.
STREAM_AFTER_SECONDS = 1.0
CALL_STREAM_TICK_SECONDS = 1.0


class Call:
    """One tools/call in flight, and the agent side waiting for it: a subclass says how it ends.

    The agent endpoint's subclass answers its HTTP request; tests record. The bridge fills
    in the routing fields when the call starts.
    """

    __slots__ = (
        "seq",
        "id",
        "app",
        "deadline",
        "slow_at",
        "wants_stream",
        "streaming",
        "grant",
        "client_id",
        "tool",
        "modern",
        "logged",
        "traceparent",
        "tracestate",
        "span",
        "progress",
    )

    def __init__(self, wants_stream: bool) -> None:
        self.init_call(wants_stream)

    def init_call(self, wants_stream: bool) -> None:
        """Set a new call's fields: what a subclass's __init__ calls (compiled, a C call, not a lookup)."""
        self.wants_stream = wants_stream  # the agent accepts text/event-stream
        self.streaming = False  # switched to a stream after a second without an answer
        self.seq = 0
        self.id = ""
        self.app: App | None = None
        self.deadline = 0.0
        self.slow_at = 0.0
        # The agent token's grant, whose calls in flight the bridge counts (--agent-max-calls);
        # None for a call no agent token made here (one forwarded from another instance).
        self.grant: Grant | None = None
        # What its log line says (docs/operations.md, Log events): the app's client ID, the Tool
        # called (or the name asked for when there is none), the era; and whether it has a line
        # here at all (a forwarded call's is written by the agent's instance).
        self.client_id: str | None = None
        self.tool: object = None
        self.modern = False
        self.logged = True
        # W3C trace context for the app (docs/protocol.md, Trace context): the agent's, or the
        # bridge's own span's when it traces (core/tracing.py); None when there is none.
        self.traceparent: bytes | None = None
        self.tracestate: str | None = None
        self.span: object = None  # the tracer's, when the bridge traces
        # Where the app's progress reports go (core/progress.py); None when nobody asked for them.
        self.progress: Progress | None = None

    def call_result(self, result: bytes, has_result_type: bool) -> None:
        """The app answered with this CallToolResult (JSON bytes, unchanged)."""
        raise NotImplementedError

    def call_error(self, text: str) -> None:
        """The call ended without the app's answer; the agent gets a tool error saying so."""
        raise NotImplementedError

    def call_slow(self) -> None:
        """A second passed without an answer: switch the response to a stream."""
        raise NotImplementedError

    def call_tick(self) -> None:
        """Another second passed on a streamed response: send a keep-alive."""
        raise NotImplementedError

    def call_progress(self, report: Report) -> None:
        """A progress report of the app, paced by the bridge, for whoever waits (the call has a `progress`)."""

    def ended(self, outcome: int) -> None:
        """The bridge counted this call's end as `outcome` (an Outcome, core/outcomes.py), just before telling it."""

    def named_by_cancel(self, request_id: bytes, session: bytes | None) -> bool:
        """Whether a legacy notifications/cancelled of this request id and session names this call."""
        return False


class InFlightCalls:
    """Every call waiting on an app, with the next time one of them needs attention."""

    __slots__ = ("timeout", "_seq", "_waiting", "_streaming", "_next_tick", "_switch_armed")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._seq = 0
        self._waiting: dict[int, Call] = {}  # every call, oldest first
        self._streaming: dict[int, Call] = {}  # calls answered as a stream, ticking
        self._next_tick: float | None = None
        # A wake-up was asked for at or before the switch time of every call that may still switch.
        self._switch_armed = False

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self):
        return iter(list(self._waiting.values()))

    def start(self, call: Call, app: App, now: float) -> float | None:
        """Track a new call; the deadline to wake up for if it is now the earliest one."""
        self._seq = seq = self._seq + 1
        call.seq = seq
        # Unique among all calls of this bridge, so certainly among a connection's (ClientMCP v1 §3.2).
        call.id = f"{seq}"  # (compiled, an f-string formats the C integer directly)
        call.app = app
        call.deadline = deadline = now + self.timeout
        call.slow_at = slow_at = now + STREAM_AFTER_SECONDS
        waiting = self._waiting
        waiting[seq] = call
        # Start order is deadline order, so a wake-up asked for an earlier call comes first:
        # only the first call, and the first that may switch to a stream, need one.
        wake = deadline if len(waiting) == 1 else None
        if call.wants_stream and not self._switch_armed:
            self._switch_armed = True
            if wake is None or slow_at < wake:
                wake = slow_at
        return wake

    def finish(self, call: Call) -> None:
        """Forget a call that ended, however it ended."""
        del self._waiting[call.seq]
        if call.streaming:
            del self._streaming[call.seq]

    def stream_now(self, call: Call, now: float) -> None:
        """Answer `call` as a stream at once, before its second is up: it has progress to report."""
        if not self._streaming:
            self._next_tick = now + CALL_STREAM_TICK_SECONDS
        call.streaming = True
        self._streaming[call.seq] = call
        call.call_slow()

    def _first_switch(self) -> Call | None:
        """The oldest call that may still switch to a stream (rare calls are skipped past)."""
        for call in self._waiting.values():
            if call.wants_stream and not call.streaming:
                return call
        return None

    def next_deadline(self) -> float | None:
        """When `on_timer` has something to do next, or None."""
        best = self._next_tick if self._streaming else None
        waiting = self._waiting
        if waiting:
            deadline = next(iter(waiting.values())).deadline
            if best is None or deadline < best:
                best = deadline
        switch = self._first_switch()
        if switch is not None and (best is None or switch.slow_at < best):
            best = switch.slow_at
        return best

    def on_timer(self, now: float) -> list[Call]:
        """Switch and tick streamed calls that are due; return (and forget) the calls timed out."""
        expired = []
        waiting = self._waiting
        while waiting:
            call = next(iter(waiting.values()))
            if call.deadline > now:
                break
            self.finish(call)
            expired.append(call)
        if self._streaming and self._next_tick is not None and now >= self._next_tick:
            self._next_tick = now + CALL_STREAM_TICK_SECONDS
            for call in list(self._streaming.values()):
                call.call_tick()
        due = []
        for call in waiting.values():
            if call.slow_at > now:
                break
            if call.wants_stream and not call.streaming:
                due.append(call)
        for call in due:
            # An earlier call_slow may have ended this call (its agent gone): skip it then.
            if call.seq in waiting and not call.streaming:
                self.stream_now(call, now)
        # The server re-arms at next_deadline(), which covers the next call that may switch.
        self._switch_armed = self._first_switch() is not None
        return expired
