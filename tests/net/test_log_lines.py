"""The `call` lines: one write per loop turn, the same fields as every other event, a bounded memo."""

from __future__ import annotations

import json
import logging

from clientmcp_fast import log
from clientmcp_fast.core.agent_context import Context
from clientmcp_fast.core.counters import OUTCOMES, RESULT, TIMEOUT, UNKNOWN_TOOL
from clientmcp_fast.core.register import Tool as RegisteredTool
from clientmcp_fast.net import log_lines
from clientmcp_fast.net.log_lines import CallLog, seconds_text, stamp
from tests.core.fakes import make_bridge


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


def agent_call(client_id: str, tool: object, modern: bool = False, streaming: bool = False) -> Context:
    """An agent's call as the bridge ends it: a Context (compiled, its fields are read in C)."""
    context = Context.__new__(Context)
    context.client_id = client_id
    context.tool = tool
    context.modern = modern
    context.streaming = streaming
    return context


def test_an_agents_call_has_the_same_line_as_any_call():
    echo = RegisteredTool("echo", (), b'"echo"')
    for json_lines in (False, True):
        calls, stream, scheduled = make(json_lines)
        calls.ended(agent_call("app-1", echo, modern=True, streaming=True), TIMEOUT, 30.0)
        calls.ended(Call("app-1", Tool("echo"), modern=True, streaming=True), TIMEOUT, 30.0)
        calls.ended(agent_call("app-2", "nosuch"), UNKNOWN_TOOL, 0.0)
        calls.ended(Call("app-2", "nosuch"), UNKNOWN_TOOL, 0.0)
        assert len(scheduled) == 1
        scheduled.pop()()
        first, second, third, fourth = stream.writes[0].splitlines()
        assert first == second and third == fourth
        if json_lines:
            assert json.loads(first) | json.loads(third) == {
                "timestamp": json.loads(first)["timestamp"],
                "level": "info",
                "event": "call",
                "client_id": "app-2",
                "tool": "nosuch",
                "era": "legacy",
                "seconds": 0.0,
                "outcome": "unknown_tool",
                "streamed": False,
            }
            assert json.loads(first)["streamed"] is True and json.loads(first)["seconds"] == 30.0
        else:
            assert first.split(" ", 1)[1] == (
                "info call client_id=app-1 tool=echo era=modern seconds=30.000000 outcome=timeout streamed=True"
            )
            assert third.split(" ", 1)[1] == (
                "info call client_id=app-2 tool=nosuch era=legacy seconds=0.000000 outcome=unknown_tool"
                " streamed=False"
            )


def test_a_call_whose_line_another_instance_writes_has_none_here():
    class Forwarded(Call):
        log_line = False

    calls, stream, scheduled = make()
    calls.ended(Forwarded("app", Tool("echo")), RESULT, 0.5)
    assert scheduled == [] and calls._pending == []
    calls.flush()
    assert stream.writes == []


def test_the_memo_never_gives_one_clients_text_to_another():
    for json_lines in (False, True):
        calls, stream, scheduled = make(json_lines)
        ids = ["alice", "bob", "a b", "alice", "echo", "bob", "a b"]
        for client_id in ids:  # the memo holds each ID's text after its first line
            calls.ended(agent_call(client_id, "echo"), RESULT, 0.0)
        scheduled.pop()()
        lines = stream.writes[0].splitlines()
        if json_lines:
            assert [(json.loads(line)["client_id"], json.loads(line)["tool"]) for line in lines] == [
                (client_id, "echo") for client_id in ids
            ]
        else:
            quoted = {"a b": '"a b"'}
            assert [line.split(" ", 1)[1] for line in lines] == [
                f"info call client_id={quoted.get(client_id, client_id)} tool=echo era=legacy"
                " seconds=0.000000 outcome=result streamed=False"
                for client_id in ids
            ]


def test_the_lines_of_a_turn_share_its_stamp_and_the_next_turn_has_its_own(monkeypatch):
    for json_lines in (False, True):
        monkeypatch.setattr(log_lines, "_time", iter([1700000000.25, 1700000001.5]).__next__)
        calls, stream, scheduled = make(json_lines)
        for _ in range(3):
            calls.ended(Call("app", "echo"), RESULT, 0.0)
        scheduled.pop()()
        calls.ended(Call("app", "echo"), RESULT, 0.0)
        scheduled.pop()()
        first_turn, second_turn = stream.writes
        if json_lines:
            stamps = [json.loads(line)["timestamp"] for line in first_turn.splitlines()]
            assert json.loads(second_turn)["timestamp"] == "2023-11-14T22:13:21.500Z"
        else:
            stamps = [line.split(" ", 1)[0] for line in first_turn.splitlines()]
            assert second_turn.startswith("2023-11-14T22:13:21.500Z info call ")
        assert stamps == ["2023-11-14T22:13:20.250Z"] * 3
        assert first_turn.endswith("\n") and first_turn.count("\n") == 3


def test_with_handlers_the_bridge_did_not_set_each_call_is_a_record_at_once():
    saved = (list(log.logger.handlers), log.logger.level, log.logger.propagate, log.debug_enabled)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    try:
        log.logger.handlers[:] = [handler]  # an embedding program's handler, not configure()'s
        log.logger.setLevel(logging.INFO)
        bridge = make_bridge()
        scheduled: list = []
        bridge.call_log = log.call_log(scheduled.append)  # the bridge takes it, compiled too
        bridge.refused_call(agent_call("app", "nosuch", modern=True), UNKNOWN_TOOL)
        assert scheduled == []  # nothing is held back for the end of the turn
        (record,) = records
        assert (record.getMessage(), record.fields) == (  # type: ignore[attr-defined]
            "call",
            {
                "client_id": "app",
                "tool": "nosuch",
                "era": "modern",
                "seconds": 0.0,
                "outcome": "unknown_tool",
                "streamed": False,
            },
        )
    finally:
        log.logger.handlers[:], log.logger.level, log.logger.propagate, log.debug_enabled = saved


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


def test_a_lines_duration_is_the_one_seconds_text_writes():
    calls, stream, scheduled = make()
    durations = (0.0000006, 0.9999996, 1.2345675, 3600.000123)
    for seconds in durations:
        calls.ended(agent_call("app", "echo"), RESULT, seconds)
    scheduled.pop()()
    written = [line.partition(" seconds=")[2].partition(" ")[0] for line in stream.writes[0].splitlines()]
    assert (
        written
        == [seconds_text(seconds) for seconds in durations]
        == ["0.000001", "1.000000", "1.234568", "3600.000123"]
    )


# -- docs/operations.md, Log events: `agent_refused`, at most a line per reason every 10 s -----------


def test_agent_refusals_are_one_line_per_reason_every_ten_seconds_with_the_rest_counted(captured_log):
    from clientmcp_fast.core.counters import REFUSED_RATE, REFUSED_SCOPE

    stream = captured_log("json")
    lines = log.RefusalLines()
    for offset in (0.0, 1.0, 9.9):
        lines.refused(REFUSED_RATE, "app-1", 100.0 + offset)
    lines.refused(REFUSED_SCOPE, "app-2", 101.0)  # another reason: its own line at once
    lines.refused(REFUSED_RATE, "app-3", 110.0)  # 10 s after the first rate line
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["event"], e["level"], e["reason"], e["client_id"], e["not_logged"]) for e in events] == [
        ("agent_refused", "info", "rate", "app-1", 0),
        ("agent_refused", "info", "scope", "app-2", 0),
        ("agent_refused", "info", "rate", "app-3", 2),  # the two within the 10 s
    ]
    assert all("token" not in line for line in stream.getvalue().splitlines())
