"""The core's counters (docs/operations.md, Metrics): what the collector reads is what was counted."""

from __future__ import annotations

from clientmcp_fast.core.counters import DURATION_BUCKETS, METHODS, Counters
from clientmcp_fast.core.outcomes import Outcome


def test_a_duration_counts_in_the_bucket_of_the_first_bound_it_is_within():
    for index, bound in enumerate(DURATION_BUCKETS):
        for seconds, expected in ((bound, index), (bound * 1.001, index + 1)):
            counters = Counters()
            counters.call_ended(Outcome.RESULT, seconds, False)
            counts = counters.durations()
            assert len(counts) == len(DURATION_BUCKETS) + 1
            assert counts[expected] == 1 and sum(counts) == 1, (seconds, counts)


def test_outcomes_and_requests_are_read_back_whatever_field_holds_them():
    counters = Counters()
    counters.call_ended(Outcome.RESULT, 0.1, True)
    counters.call_ended(Outcome.TIMEOUT, 2.0, False)
    counters.calls_ended[Outcome.OFFLINE] += 1
    assert {outcome.label: count for outcome, count in zip(Outcome, counters.outcomes())} == {
        **dict.fromkeys([outcome.label for outcome in Outcome], 0),
        "result": 1,
        "timeout": 1,
        "offline": 1,
    }
    assert counters.calls_streamed == 1 and abs(counters.duration_sum - 2.1) < 1e-9
    for modern, method in (
        (False, "tools/call"),
        (True, "tools/call"),
        (True, "tools/list"),
        (False, "x/y"),
        (False, 7),
    ):
        counters.request(modern, method)
    counts = counters.requests_by_method()
    legacy, modern = dict(zip(METHODS, counts[: len(METHODS)])), dict(zip(METHODS, counts[len(METHODS) :]))
    assert legacy == {**dict.fromkeys(METHODS, 0), "tools/call": 1, "other": 2}
    assert modern == {**dict.fromkeys(METHODS, 0), "tools/call": 1, "tools/list": 1}


def test_http_responses_by_status():
    counters = Counters()
    for status in (200, 200, 404, 202):
        counters.responded(status)
    assert counters.responses() == {200: 2, 404: 1, 202: 1}


def test_each_outcome_keeps_its_number_label_and_tool_error():
    """Numbers travel between instances (core/wire.py) and index the counters; labels are metric values."""
    assert [(int(outcome), outcome.label) for outcome in Outcome] == list(
        enumerate(
            (
                "result",
                "tool_error",
                "offline",
                "not_registered",
                "unknown_tool",
                "timeout",
                "disconnected",
                "replaced",
                "cancelled",
                "busy",
                "too_large",
                "shutting_down",
            )
        )
    )
    # A tool error of its own for each outcome the bridge decides without a parameter; the
    # others are the app's answer, the agent gone, or a text naming the call (core/outcomes.py).
    told = {outcome for outcome in Outcome if outcome.text}
    assert told == {
        Outcome.OFFLINE,
        Outcome.NOT_REGISTERED,
        Outcome.DISCONNECTED,
        Outcome.REPLACED,
        Outcome.BUSY,
        Outcome.TOO_LARGE,
        Outcome.SHUTTING_DOWN,
    }
    assert Outcome.REPLACED.text == Outcome.DISCONNECTED.text  # to the agent, the app left
