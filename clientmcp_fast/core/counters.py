"""What the bridge has done, as plain integers: read by the metrics collector at scrape time (docs/operations.md).

The core counts and never reads a clock: a call's duration is the difference of two `now`
values the I/O layer gave it. Nothing here is labelled by a client ID, a tool name or any
other value a client or agent chooses: per-ID detail belongs in the logs.
"""

from __future__ import annotations

from clientmcp_fast.core.outcomes import Outcome

# Why the agent endpoint refused an agent (docs/operations.md, Metrics); an index into
# `Counters.refusals`: a call of a tool outside its token's scope (answered as an unknown tool),
# a token over --agent-rate, a token at --agent-max-calls.
REFUSALS = ("scope", "rate", "concurrency")
REFUSED_SCOPE = 0
REFUSED_RATE = 1
REFUSED_CONCURRENCY = 2

# The methods agent requests are counted by (docs/operations.md, Metrics); any other is "other",
# so that an agent cannot add a label value.
METHODS = (
    "tools/call",
    "tools/list",
    "initialize",
    "ping",
    "server/discover",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "other",
)
_METHOD_INDEX = {method: index for index, method in enumerate(METHODS)}
_OTHER_METHOD = len(METHODS) - 1
ERAS = ("legacy", "modern")
# Bound once: a member looked up through its enum class is slow, and this one is read per call.
_RESULT = Outcome.RESULT

# Upper bounds in seconds of the call duration histogram: calls wait on people, so minutes count.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)


class Counters:
    """Plain counters the core increments; the collector (clientmcp_fast/metrics.py) reads them."""

    __slots__ = (
        "app_connections_opened",
        "app_connections_closed",
        "closes",
        "registers_accepted",
        "registers_refused",
        "calls_started",
        "calls_result",
        "calls_ended",
        "calls_streamed",
        "bucket_0",
        "bucket_1",
        "bucket_2",
        "bucket_3",
        "bucket_4",
        "bucket_5",
        "bucket_6",
        "bucket_7",
        "bucket_8",
        "bucket_9",
        "bucket_10",
        "bucket_11",
        "bucket_12",
        "bucket_13",
        "bucket_14",
        "bucket_15",
        "bucket_16",
        "duration_sum",
        "list_changed_sent",
        "http_responses",
        "responses_200",
        "requests",
        "legacy_tools_calls",
        "modern_tools_calls",
        "http_bytes_in",
        "http_bytes_out",
        "websocket_bytes_in",
        "websocket_bytes_out",
        "forwarded",
        "served",
        "refusals",
    )

    def __init__(self) -> None:
        self.app_connections_opened = 0
        self.app_connections_closed = 0
        self.closes: dict[int, int] = {}  # close code -> connections closed with it
        self.registers_accepted = 0
        self.registers_refused = 0
        self.calls_started = 0  # sent to an app
        # Every tools/call answered, by outcome: the common one in a field of its own, since a
        # list item's increment makes an int object and frees one (compiled, a field is an add).
        self.calls_result = 0
        self.calls_ended = [0] * len(Outcome)  # indexed by Outcome
        self.calls_streamed = 0  # ended after their answer became an SSE stream
        # Calls by duration: bucket_N counts those within DURATION_BUCKETS[N] and over the
        # bound before; the last, those over every bound (fields, for the same reason).
        self.bucket_0 = 0
        self.bucket_1 = 0
        self.bucket_2 = 0
        self.bucket_3 = 0
        self.bucket_4 = 0
        self.bucket_5 = 0
        self.bucket_6 = 0
        self.bucket_7 = 0
        self.bucket_8 = 0
        self.bucket_9 = 0
        self.bucket_10 = 0
        self.bucket_11 = 0
        self.bucket_12 = 0
        self.bucket_13 = 0
        self.bucket_14 = 0
        self.bucket_15 = 0
        self.bucket_16 = 0
        self.duration_sum = 0.0
        self.list_changed_sent = 0
        self.http_responses: dict[int, int] = {}  # status -> responses started with it, but 200
        self.responses_200 = 0  # the common status, kept apart: an increment, not a dict update
        # JSON-RPC messages read by the agent endpoint: the legacy era's by method, then the modern's.
        self.requests = [0] * (2 * len(METHODS))
        self.legacy_tools_calls = 0
        self.modern_tools_calls = 0
        # Bytes read and written: on HTTP connections (agents, and apps until their upgrade), on apps' WebSockets.
        self.http_bytes_in = 0
        self.http_bytes_out = 0
        self.websocket_bytes_in = 0
        self.websocket_bytes_out = 0
        # With --nats (docs/scaling.md), by outcome: calls for an app held by another instance,
        # and calls run here for an agent of another instance. Counted by the app directory
        # once per call end, never on a single process's path.
        self.forwarded = [0] * len(Outcome)
        self.served = [0] * len(Outcome)
        self.refusals = [0] * len(REFUSALS)  # agents refused, by reason (REFUSALS)

    def closed(self, code: int) -> None:
        """An app connection closed with `code` (sent or received)."""
        self.app_connections_closed += 1
        closes = self.closes
        closes[code] = closes.get(code, 0) + 1

    def call_ended(self, outcome: int, seconds: float, streamed: bool) -> None:
        """A call sent to an app ended with `outcome` (an Outcome) after `seconds`."""
        if outcome == _RESULT:
            self.calls_result += 1
        else:
            self.calls_ended[outcome] += 1
        if streamed:
            self.calls_streamed += 1
        self.duration_sum += seconds
        if seconds <= 0.005:
            self.bucket_0 += 1
        elif seconds <= 0.01:
            self.bucket_1 += 1
        elif seconds <= 0.025:
            self.bucket_2 += 1
        elif seconds <= 0.05:
            self.bucket_3 += 1
        elif seconds <= 0.1:
            self.bucket_4 += 1
        elif seconds <= 0.25:
            self.bucket_5 += 1
        elif seconds <= 0.5:
            self.bucket_6 += 1
        elif seconds <= 1.0:
            self.bucket_7 += 1
        elif seconds <= 2.5:
            self.bucket_8 += 1
        elif seconds <= 5.0:
            self.bucket_9 += 1
        elif seconds <= 10.0:
            self.bucket_10 += 1
        elif seconds <= 30.0:
            self.bucket_11 += 1
        elif seconds <= 60.0:
            self.bucket_12 += 1
        elif seconds <= 120.0:
            self.bucket_13 += 1
        elif seconds <= 300.0:
            self.bucket_14 += 1
        elif seconds <= 600.0:
            self.bucket_15 += 1
        else:
            self.bucket_16 += 1

    def outcomes(self) -> list[int]:
        """Calls answered, by outcome (indexed by Outcome)."""
        counts = list(self.calls_ended)
        counts[_RESULT] += self.calls_result
        return counts

    def durations(self) -> list[int]:
        """Calls by duration bucket, not cumulative (the last: over every bound)."""
        return [
            self.bucket_0,
            self.bucket_1,
            self.bucket_2,
            self.bucket_3,
            self.bucket_4,
            self.bucket_5,
            self.bucket_6,
            self.bucket_7,
            self.bucket_8,
            self.bucket_9,
            self.bucket_10,
            self.bucket_11,
            self.bucket_12,
            self.bucket_13,
            self.bucket_14,
            self.bucket_15,
            self.bucket_16,
        ]

    def responded(self, status: int) -> None:
        """An HTTP response started with `status`."""
        if status == 200:
            self.responses_200 += 1
            return
        responses = self.http_responses
        responses[status] = responses.get(status, 0) + 1

    def request(self, modern: bool, method: object) -> None:
        """An agent's JSON-RPC message (a request, a notification or a batch's element) reached its era."""
        if method == "tools/call":  # the common one, in fields of their own
            if modern:
                self.modern_tools_calls += 1
            else:
                self.legacy_tools_calls += 1
            return
        index = _METHOD_INDEX.get(method, _OTHER_METHOD) if type(method) is str else _OTHER_METHOD
        if modern:
            index += len(METHODS)
        self.requests[index] += 1

    def requests_by_method(self) -> list[int]:
        """Agents' messages: the legacy era's by method (in the order of METHODS), then the modern's."""
        counts = list(self.requests)
        counts[_METHOD_INDEX["tools/call"]] += self.legacy_tools_calls
        counts[len(METHODS) + _METHOD_INDEX["tools/call"]] += self.modern_tools_calls
        return counts

    def responses(self) -> dict[int, int]:
        """HTTP responses started, by status."""
        responses = dict(self.http_responses)
        if self.responses_200:
            responses[200] = self.responses_200
        return responses
