"""The core's counters (docs/operations.md, Metrics): what the collector reads is what was counted."""

from __future__ import annotations

from clientmcp_fast.core.counters import DURATION_BUCKETS, METHODS, OUTCOMES, RESULT, TIMEOUT, Counters


def test_a_duration_counts_in_the_bucket_of_the_first_bound_it_is_within():
    for index, bound in enumerate(DURATION_BUCKETS):
        for seconds, expected in ((bound, index), (bound * 1.001, index + 1)):
            counters = Counters()
            counters.call_ended(RESULT, seconds, False)
            counts = counters.durations()
            assert len(counts) == len(DURATION_BUCKETS) + 1
            assert counts[expected] == 1 and sum(counts) == 1, (seconds, counts)


def test_outcomes_and_requests_are_read_back_whatever_field_holds_them():
    counters = Counters()
    counters.call_ended(RESULT, 0.1, True)
    counters.call_ended(TIMEOUT, 2.0, False)
    counters.calls_ended[OUTCOMES.index("offline")] += 1
    assert dict(zip(OUTCOMES, counters.outcomes())) == {
        **dict.fromkeys(OUTCOMES, 0),
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
