"""The event log's lines: `call` lines one write per loop turn, the one line format, every event at its level."""

from __future__ import annotations

import io
import json
import logging

import pytest

from clientmcp_fast import log
from clientmcp_fast.core.agent_context import Context
from clientmcp_fast.core.calls import Call as CoreCall
from clientmcp_fast.core.counters import REFUSED_RATE, REFUSED_SCOPE
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.register import Tool as RegisteredTool
from clientmcp_fast.net import log_lines
from clientmcp_fast.net.log_lines import EventLines, event_line, seconds_text, stamp
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


class Call(CoreCall):
    """A call of the bridge's that no agent made here (an embedding program's, say)."""

    def __init__(
        self, client_id: object, tool: object, modern: bool = False, streaming: bool = False
    ) -> None:
        self.init_call(False)
        self.client_id = client_id
        self.tool = tool
        self.modern = modern
        self.streaming = streaming


def at_level(level: int) -> logging.Logger:
    """A logger at `level` that writes nowhere: an `EventLines` with a stream reads only its level."""
    logger = logging.getLogger(f"clientmcp-tests.log-lines.{logging.getLevelName(level)}")
    logger.setLevel(level)
    logger.propagate = False
    return logger


def make(json_lines: bool = False, level: int = logging.INFO) -> tuple[EventLines, Stream, list]:
    scheduled: list = []
    stream = Stream()
    return EventLines(at_level(level), scheduled.append, stream, json_lines), stream, scheduled


def test_the_calls_of_one_turn_are_one_write_scheduled_once():
    calls, stream, scheduled = make()
    for n in range(5):
        calls.call_ended(Call(f"app-{n}", Tool("echo")), Outcome.RESULT, 0.25)
    assert len(scheduled) == 1 and stream.writes == []  # nothing is written before the turn ends
    scheduled.pop()()
    assert len(stream.writes) == 1 and stream.flushes == 1
    lines = stream.writes[0].splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        f"info call client_id=app-{n} tool=echo era=legacy seconds=0.250000 outcome=result streamed=False"
        for n in range(5)
    ]
    calls.call_ended(Call("next", "nosuch", modern=True), Outcome.UNKNOWN_TOOL, 0.0)
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
    calls.call_ended(Call("a b", 'x="1"'), Outcome.TIMEOUT, 2.0)
    calls.call_ended(Call(None, None, streaming=True), Outcome.RESULT, 1.5)
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
    calls.call_ended(Call("a\u00e9 b", Tool("echo"), modern=True, streaming=True), Outcome.RESULT, 1.2345678)
    calls.call_ended(Call(None, None), Outcome.OFFLINE, 0.0)
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
    context.init_call(False)
    context.client_id = client_id
    context.tool = tool
    context.modern = modern
    context.streaming = streaming
    return context


def test_an_agents_call_has_the_same_line_as_any_call():
    echo = RegisteredTool("echo", (), b'"echo"')
    for json_lines in (False, True):
        calls, stream, scheduled = make(json_lines)
        calls.call_ended(agent_call("app-1", echo, modern=True, streaming=True), Outcome.TIMEOUT, 30.0)
        calls.call_ended(Call("app-1", Tool("echo"), modern=True, streaming=True), Outcome.TIMEOUT, 30.0)
        calls.call_ended(agent_call("app-2", "nosuch"), Outcome.UNKNOWN_TOOL, 0.0)
        calls.call_ended(Call("app-2", "nosuch"), Outcome.UNKNOWN_TOOL, 0.0)
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
        def __init__(self, client_id: object, tool: object) -> None:
            super().__init__(client_id, tool)
            self.logged = False  # as core/forwarding.py's ForwardedCall

    calls, stream, scheduled = make()
    calls.call_ended(Forwarded("app", Tool("echo")), Outcome.RESULT, 0.5)
    assert scheduled == [] and calls._pending == []
    calls.flush()
    assert stream.writes == []


def test_the_memo_never_gives_one_clients_text_to_another():
    for json_lines in (False, True):
        calls, stream, scheduled = make(json_lines)
        ids = ["alice", "bob", "a b", "alice", "echo", "bob", "a b"]
        for client_id in ids:  # the memo holds each ID's text after its first line
            calls.call_ended(agent_call(client_id, "echo"), Outcome.RESULT, 0.0)
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
            calls.call_ended(Call("app", "echo"), Outcome.RESULT, 0.0)
        scheduled.pop()()
        calls.call_ended(Call("app", "echo"), Outcome.RESULT, 0.0)
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


class Records(logging.Handler):
    """An embedding program's handler: keeps each record."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def foreign_handler():
    """The bridge's logger at info with a handler configure() did not set, as an embedding program's."""
    saved = (list(log.logger.handlers), log.logger.level, log.logger.propagate, log.debug_enabled)
    handler = Records()
    log.logger.handlers[:] = [handler]
    log.logger.setLevel(logging.INFO)
    yield handler
    log.logger.handlers[:], log.logger.level, log.logger.propagate, log.debug_enabled = saved


def test_with_handlers_the_bridge_did_not_set_each_call_is_a_record_at_once(foreign_handler):
    bridge = make_bridge()
    scheduled: list = []
    bridge.events = log.event_log(scheduled.append)  # the bridge takes it, compiled too
    bridge.refused_call(agent_call("app", "nosuch", modern=True), Outcome.UNKNOWN_TOOL)
    assert scheduled == []  # nothing is held back for the end of the turn
    (record,) = foreign_handler.records
    assert (record.getMessage(), record.levelno, record.event, record.fields) == (  # type: ignore[attr-defined]
        "call",
        logging.INFO,
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


def test_with_handlers_the_bridge_did_not_set_a_call_another_instance_logs_has_no_record(foreign_handler):
    # A forwarded call's line is the agent's instance's, however this one's log is written.
    class Forwarded(Call):
        def __init__(self, client_id: object, tool: object) -> None:
            super().__init__(client_id, tool)
            self.logged = False  # as core/forwarding.py's ForwardedCall

    events = log.event_log([].append)
    events.call_ended(Forwarded("app", Tool("echo")), Outcome.RESULT, 0.5)
    events.call_ended(Call("app", Tool("echo")), Outcome.RESULT, 0.5)
    assert [record.fields["client_id"] for record in foreign_handler.records] == ["app"]  # type: ignore[attr-defined]


def test_with_handlers_the_bridge_did_not_set_every_event_is_a_record(foreign_handler):
    log.logger.setLevel(logging.DEBUG)
    events = log.event_log([].append)
    events.app_connected("app")
    events.app_refused("token expired")
    events.agent_unauthorized("bad signature")
    events.cluster_stalled(3.25)
    got = [
        (record.levelno, getattr(record, "event", None), getattr(record, "fields", None), record.getMessage())
        for record in foreign_handler.records
    ]
    assert got[:2] == [
        (logging.INFO, "app_connected", {"client_id": "app"}, "app_connected"),
        (logging.WARNING, "app_refused", {"reason": "token expired"}, "app_refused"),
    ]
    assert got[2] == (logging.DEBUG, None, None, "agent refused: bad signature")
    assert got[3][:3] == (logging.WARNING, None, None)
    assert got[3][3].startswith("cluster: this instance sent no heartbeat for 3.2 s")


def test_the_memo_of_texts_stays_bounded():
    calls, stream, scheduled = make()
    for n in range(3 * log_lines._MAX_TEXTS):
        calls.call_ended(Call(f"id-{n}", f"tool-{n}"), Outcome.RESULT, 0.0)
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
        calls.call_ended(agent_call("app", "echo"), Outcome.RESULT, seconds)
    scheduled.pop()()
    written = [line.partition(" seconds=")[2].partition(" ")[0] for line in stream.writes[0].splitlines()]
    assert (
        written
        == [seconds_text(seconds) for seconds in durations]
        == ["0.000001", "1.000000", "1.234568", "3600.000123"]
    )


# -- docs/operations.md, Log events: `agent_refused`, at most a line per reason every 10 s -----------


def test_agent_refusals_are_one_line_per_reason_every_ten_seconds_with_the_rest_counted(captured_log):
    stream = captured_log("json")
    lines = log.event_log([].append)
    for offset in (0.0, 1.0, 9.9):
        lines.agent_refused(REFUSED_RATE, "app-1", 100.0 + offset)
    lines.agent_refused(REFUSED_SCOPE, "app-2", 101.0)  # another reason: its own line at once
    lines.agent_refused(REFUSED_RATE, "app-3", 110.0)  # 10 s after the first rate line
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["event"], e["level"], e["reason"], e["client_id"], e["not_logged"]) for e in events] == [
        ("agent_refused", "info", "rate", "app-1", 0),
        ("agent_refused", "info", "scope", "app-2", 0),
        ("agent_refused", "info", "rate", "app-3", 2),  # the two within the 10 s
    ]
    assert all("token" not in line for line in stream.getvalue().splitlines())


# -- one line format: the `call` line made fast is the line of its event ------------------------------


@pytest.mark.parametrize("json_lines", [False, True], ids=["text", "json"])
def test_a_call_line_is_the_line_event_line_makes_of_its_fields(json_lines, monkeypatch):
    monkeypatch.setattr(log_lines, "_time", lambda: 1700000000.25)
    when = stamp(1700000000.25)
    for outcome in range(len(Outcome)):
        for modern in (False, True):
            for streamed in (False, True):
                for client_id, tool, seconds in (("app-1", "echo", 1.2345678), ("a b", 'x="1"', 0.0)):
                    calls, stream, scheduled = make(json_lines)
                    calls.call_ended(agent_call(client_id, tool, modern, streamed), outcome, seconds)
                    scheduled.pop()()
                    fields = {
                        "client_id": client_id,
                        "tool": tool,
                        "era": "modern" if modern else "legacy",
                        "seconds": round(seconds, 6) if json_lines else seconds,
                        "outcome": Outcome(outcome).label,
                        "streamed": streamed,
                    }
                    assert stream.writes == [event_line(when, "info", "call", fields, json_lines) + "\n"]


def test_the_log_s_formatters_write_the_lines_of_event_line_and_message_line():
    for form in ("text", "json"):
        saved = (list(log.logger.handlers), log.logger.level, log.logger.propagate, log.debug_enabled)
        try:
            stream = io.StringIO()
            log.configure("info", stream, form)
            log.logger.info("listening on %s", "127.0.0.1:8080")
            log.logger.info("call", extra={"event": "call", "fields": {"client_id": "a b", "seconds": 0.5}})
        finally:
            log.logger.handlers[:], log.logger.level, log.logger.propagate, log.debug_enabled = saved
        json_lines = form == "json"
        first, second = stream.getvalue().splitlines()
        stamps = [
            json.loads(line)["timestamp"] if json_lines else line.split(" ", 1)[0] for line in (first, second)
        ]
        assert first == log_lines.message_line(stamps[0], "info", "listening on 127.0.0.1:8080", json_lines)
        fields = {"client_id": "a b", "seconds": 0.5}
        assert second == event_line(stamps[1], "info", "call", fields, json_lines)


# -- each event at its level -----------------------------------------------------------------------


def _tell_every_event(events: EventLines) -> None:
    events.app_connected("app")
    events.app_closed("app", 4409, "replaced by a newer connection for this client ID")
    events.app_refused("token expired")
    events.register_refused("app", 'tools[0] "a b": name has invalid characters')
    events.agent_refused(REFUSED_RATE, "app", 100.0)
    events.agent_unauthorized("no agent token: send Authorization: Bearer <token>")
    events.cluster_message_too_large("app", 1048576)
    events.cluster_message_dropped("forged", "")
    events.cluster_message_dropped("malformed", "field 2 of a message of kind 4")
    events.cluster_wire_mismatch("future0", 3, 2)
    events.cluster_apps_not_kept(100)
    events.cluster_stalled(2.54)


def test_every_event_has_its_line_at_its_level():
    events, stream, scheduled = make(level=logging.DEBUG)
    _tell_every_event(events)
    assert scheduled == [] and stream.flushes == len(stream.writes) == 12  # each at once
    lines = [write.split(" ", 1)[1] for write in stream.writes]
    assert lines == [
        "info app_connected client_id=app\n",
        'info app_closed client_id=app code=4409 reason="replaced by a newer connection for this client ID"\n',
        'warn app_refused reason="token expired"\n',
        'info register_refused client_id=app reason="tools[0] \\"a b\\": name has invalid characters"\n',
        "info agent_refused reason=rate client_id=app not_logged=0\n",
        "debug agent refused: no agent token: send Authorization: Bearer <token>\n",
        "warn cluster: a message about 'app' is over 1048576 bytes: not sent\n",
        "warn cluster: dropped a bus message (forged); counted in clientmcp_cluster_messages_dropped_total, "
        "said at most once a minute per reason (docs/scaling.md, Threat model)\n",
        "warn cluster: dropped a bus message (malformed: field 2 of a message of kind 4); counted in "
        "clientmcp_cluster_messages_dropped_total, said at most once a minute per reason "
        "(docs/scaling.md, Threat model)\n",
        "warn cluster: instance future0 speaks cluster wire version 3, this one 2: it is ignored and its "
        "apps are not reachable from here; a cluster runs one wire version (docs/scaling.md, Upgrades)\n",
        "warn cluster: this instance keeps the tools of 100 apps held elsewhere (--max-remote-apps); agents "
        "here get a tool error for the others\n",
        "warn cluster: this instance sent no heartbeat for 2.5 s (its event loop stalled?): the others may "
        "have taken it as gone, so its calls between instances end and it joins again\n",
    ]


def test_json_lines_of_events_and_messages():
    events, stream, _ = make(json_lines=True, level=logging.DEBUG)
    events.app_closed("app", 1000, "")
    events.agent_unauthorized("bad signature")
    closed, message = (json.loads(write) for write in stream.writes)
    assert closed | {"timestamp": None} == {
        "timestamp": None,
        "level": "info",
        "event": "app_closed",
        "client_id": "app",
        "code": 1000,
        "reason": "",
    }
    assert message | {"timestamp": None} == {
        "timestamp": None,
        "level": "debug",
        "event": "message",
        "message": "agent refused: bad signature",
    }


@pytest.mark.parametrize(
    ("level", "written"),
    [
        (logging.INFO, 11),  # all but the 401 at debug
        (logging.WARNING, 7),  # app_refused and the six warnings of the cluster
        (logging.ERROR, 0),
    ],
)
def test_below_its_level_an_event_has_no_line(level, written):
    events, stream, scheduled = make(level=level)
    _tell_every_event(events)
    events.call_ended(agent_call("app", "echo"), Outcome.RESULT, 0.5)
    if level > logging.INFO:
        assert scheduled == [] and events._pending == []  # no call line is even made
    assert len(stream.writes) == written


def test_the_base_event_log_tells_nobody():
    bridge = make_bridge()  # given no event log: the base class, whose methods do nothing
    assert type(bridge.events).__name__ == "EventLog"
    _tell_every_event(bridge.events)
    bridge.events.call_ended(agent_call("app", "echo"), Outcome.RESULT, 0.5)
