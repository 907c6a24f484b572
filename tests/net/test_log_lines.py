"""The `call` lines: one write per loop turn, the same fields as every other event, a bounded memo."""

from __future__ import annotations

import json

from clientmcp_fast.core.counters import OUTCOMES, RESULT, TIMEOUT, UNKNOWN_TOOL
from clientmcp_fast.net import log_lines
from clientmcp_fast.net.log_lines import CallLog, seconds_text, stamp


class Stream:
    """A text stream that keeps each write apart, and counts flushes."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, text: str) -> None:
        self.writes.append(text)

    def flush(self) -> None:
        self.flushes += 1


class Tool:
    def __init__(self, name: str) -> None:
        self.name = name


class Call:
    def __init__(
        self, client_id: object, tool: object, modern: bool = False, streaming: bool = False
    ) -> None:
        self.client_id = client_id
        self.tool = tool
        self.modern = modern
        self.streaming = streaming


def make(json_lines: bool = False) -> tuple[CallLog, Stream, list]:
    scheduled: list = []
    stream = Stream()
    return CallLog(scheduled.append, stream, json_lines), stream, scheduled


def test_the_calls_of_one_turn_are_one_write_scheduled_once():
    calls, stream, scheduled = make()
    for n in range(5):
        calls.ended(Call(f"app-{n}", Tool("echo")), RESULT, 0.25)
    assert len(scheduled) == 1 and stream.writes == []  # nothing is written before the turn ends
    scheduled.pop()()
    assert len(stream.writes) == 1 and stream.flushes == 1
    lines = stream.writes[0].splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        f"info call client_id=app-{n} tool=echo era=legacy seconds=0.250000 outcome=result streamed=False"
        for n in range(5)
    ]
    calls.ended(Call("next", "nosuch", modern=True), UNKNOWN_TOOL, 0.0)
    assert len(scheduled) == 1  # the next turn schedules its own write
    scheduled.pop()()
    assert stream.writes[1].split(" ", 1)[1] == (
        "info call client_id=next tool=nosuch era=modern seconds=0.000000 outcome=unknown_tool streamed=False\n"
    )


def test_a_flush_with_nothing_ended_writes_nothing():
    calls, stream, _ = make()
    calls.flush()
    assert stream.writes == [] and stream.flushes == 0


def test_text_values_a_client_chose_are_quoted():
    calls, stream, scheduled = make()
    calls.ended(Call("a b", 'x="1"'), TIMEOUT, 2.0)
    calls.ended(Call(None, None, streaming=True), RESULT, 1.5)
    scheduled.pop()()
    first, second = stream.writes[0].splitlines()
    assert first.endswith(
        'client_id="a b" tool="x=\\"1\\"" era=legacy seconds=2.000000 outcome=timeout streamed=False'
    )
    assert second.endswith(
        "client_id=None tool=None era=legacy seconds=1.500000 outcome=result streamed=True"
    )


def test_json_lines_hold_the_event_fields():
    calls, stream, scheduled = make(json_lines=True)
    calls.ended(Call("a\u00e9 b", Tool("echo"), modern=True, streaming=True), RESULT, 1.2345678)
    calls.ended(Call(None, None), OUTCOMES.index("offline"), 0.0)
    scheduled.pop()()
    first, second = (json.loads(line) for line in stream.writes[0].splitlines())
    assert set(first) == {
        "timestamp",
        "level",
        "event",
        "client_id",
        "tool",
        "era",
        "seconds",
        "outcome",
        "streamed",
    }
    assert first["timestamp"].endswith("Z") and len(first["timestamp"]) == len("2026-12-02T07:40:00.123Z")
    assert (first["level"], first["event"], first["client_id"], first["tool"]) == (
        "info",
        "call",
        "a\u00e9 b",
        "echo",
    )
    assert (first["era"], first["seconds"], first["outcome"], first["streamed"]) == (
        "modern",
        1.234568,
        "result",
        True,
    )
    assert (second["client_id"], second["tool"]) == (None, None)
    assert (second["outcome"], second["streamed"]) == ("offline", False)


def test_the_memo_of_texts_stays_bounded():
    calls, stream, scheduled = make()
    for n in range(3 * log_lines._MAX_TEXTS):
        calls.ended(Call(f"id-{n}", f"tool-{n}"), RESULT, 0.0)
    scheduled.pop()()
    assert len(calls._texts) <= log_lines._MAX_TEXTS
    assert len(stream.writes[0].splitlines()) == 3 * log_lines._MAX_TEXTS


def test_stamps_are_utc_to_the_millisecond():
    assert stamp(0.0) == "1970-01-01T00:00:00.000Z"
    assert stamp(1700000000.9999) == "2023-11-14T22:13:20.999Z"
    assert stamp(1700000001.042) == "2023-11-14T22:13:21.042Z"


def test_a_duration_is_written_to_the_microsecond_as_a_float_format_would():
    for seconds in (
        0.0,
        0.25,
        1.5,
        2.0,
        0.000001,
        0.0000004,
        0.0000006,
        0.123456,
        59.999999,
        30.0,
        3600.000123,
    ):
        assert seconds_text(seconds) == f"{seconds:.6f}", seconds
    assert seconds_text(0.9999996) == "1.000000"  # a carry into the whole seconds
    for n in range(1, 20_000):  # any duration: within half a microsecond, six decimals
        seconds = n * 0.0003719
        text = seconds_text(seconds)
        fraction = text.partition(".")[2]
        assert len(fraction) == 6 and abs(float(text) - seconds) <= 0.5e-6 + 1e-12, (seconds, text)
