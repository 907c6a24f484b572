"""Calls in flight and their deadlines: the timeout, the switch to streaming, the keep-alive ticks.

Every call has the same timeout and the same streaming delay, so start order is
deadline order: insertion-ordered dicts give the next deadline in O(1) and let a call
leave in O(1) when it ends, without a heap or a timer per call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clientmcp_fast.core.channel import AppChannel

# Spec §4.3: a call still running after a second is answered as an SSE stream, with an
# SSE comment every second until the answer.
STREAM_AFTER_SECONDS = 1.0
STREAM_KEEPALIVE_SECONDS = 1.0


class Waiter(Protocol):
    """The agent side of a call, told how it goes (the agent endpoint implements it)."""

    wants_stream: bool  # the agent accepts text/event-stream

    def call_result(self, result: bytes, has_result_type: bool) -> None:
        """The app answered with this CallToolResult (JSON bytes, unchanged)."""

    def call_error(self, text: str) -> None:
        """The call ended without the app's answer; the agent gets a tool error saying so."""

    def call_slow(self) -> None:
        """A second passed without an answer: switch the response to a stream."""

    def call_tick(self) -> None:
        """Another second passed on a streamed response: send a keep-alive."""


class Call:
    """One tools/call in flight: which app runs it, who waits for it, and until when."""

    __slots__ = ("seq", "id", "app", "waiter", "deadline", "slow_at")

    def __init__(self, seq: int, app: AppChannel, waiter: Waiter, deadline: float, slow_at: float) -> None:
        self.seq = seq
        # Unique among all calls of this bridge, so certainly among a connection's (spec §3.2).
        self.id = str(seq)
        self.app = app
        self.waiter = waiter
        self.deadline = deadline
        self.slow_at = slow_at


class InFlightCalls:
    """Every call waiting on an app, with the next time one of them needs attention."""

    __slots__ = ("timeout", "_seq", "_waiting", "_not_slow", "_slow", "_next_tick")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._seq = 0
        self._waiting: dict[int, Call] = {}  # every call, oldest first
        self._not_slow: dict[int, Call] = {}  # calls that may still switch to a stream
        self._slow: dict[int, Call] = {}  # calls answered as a stream, ticking
        self._next_tick: float | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self):
        return iter(list(self._waiting.values()))

    def start(self, app: AppChannel, waiter: Waiter, now: float) -> tuple[Call, float | None]:
        """A new call, and the deadline to wake up for if it is now the earliest one."""
        self._seq += 1
        seq = self._seq
        call = Call(seq, app, waiter, now + self.timeout, now + STREAM_AFTER_SECONDS)
        self._waiting[seq] = call
        wake = call.deadline if len(self._waiting) == 1 else None
        if waiter.wants_stream:
            self._not_slow[seq] = call
            if len(self._not_slow) == 1 and (wake is None or call.slow_at < wake):
                wake = call.slow_at
        return call, wake

    def finish(self, call: Call) -> None:
        """Forget a call that ended, however it ended."""
        seq = call.seq
        del self._waiting[seq]
        self._not_slow.pop(seq, None)
        if self._slow:
            self._slow.pop(seq, None)

    def next_deadline(self) -> float | None:
        """When `on_timer` has something to do next, or None."""
        best = None
        for calls in (self._waiting, self._not_slow):
            if calls:
                first = next(iter(calls.values()))
                when = first.deadline if calls is self._waiting else first.slow_at
                if best is None or when < best:
                    best = when
        if self._slow and self._next_tick is not None and (best is None or self._next_tick < best):
            best = self._next_tick
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
        if self._slow and self._next_tick is not None and now >= self._next_tick:
            self._next_tick = now + STREAM_KEEPALIVE_SECONDS
            for call in list(self._slow.values()):
                call.waiter.call_tick()
        not_slow = self._not_slow
        while not_slow:
            call = next(iter(not_slow.values()))
            if call.slow_at > now:
                break
            del not_slow[call.seq]
            if not self._slow:
                self._next_tick = now + STREAM_KEEPALIVE_SECONDS
            self._slow[call.seq] = call
            call.waiter.call_slow()
        return expired
