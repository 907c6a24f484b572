"""Progress reports of a call, checked and paced without sockets or clock (docs/protocol.md, Progress)."""

from __future__ import annotations

import json

import msgspec
import pytest
from fakes import NOW, RecordingWaiter, RecordingWake, connect, make_bridge, register, send, tool

from clientmcp_fast.core.progress import (
    MAX_PROGRESS_MESSAGE_CHARS,
    PROGRESS_PER_SECOND,
    Progress,
    ProgressError,
    Report,
    parse_report,
    progress_notification,
)

UNSET = msgspec.UNSET


def raw(value: object) -> msgspec.Raw:
    return msgspec.Raw(json.dumps(value).encode())


# -- the report as the app sends it ------------------------------------------------------------


def test_a_report_keeps_its_numbers_and_message():
    assert parse_report(raw(3), raw(10), raw("Copying")) == Report(3.0, 10.0, "Copying")
    assert parse_report(raw(0.25), UNSET, UNSET) == Report(0.25, None, None)


@pytest.mark.parametrize(
    ("progress", "total", "message", "problem"),
    [
        (UNSET, UNSET, UNSET, "progress: progress is missing"),
        (raw("1"), UNSET, UNSET, "progress: progress must be a number"),
        (raw(None), UNSET, UNSET, "progress: progress must be a number"),
        (raw(True), UNSET, UNSET, "progress: progress must be a number"),
        (msgspec.Raw(b"-1e400"), UNSET, UNSET, "progress: progress must be a finite number"),
        (raw(1), raw([]), UNSET, "progress: total must be a number"),
        (raw(1), raw(None), UNSET, "progress: total must be a number"),
        (raw(1), UNSET, raw(None), "progress: message must be a string"),
        (
            raw(1),
            UNSET,
            raw("é" * (MAX_PROGRESS_MESSAGE_CHARS + 1)),
            "progress: message over 1024 characters",
        ),
    ],
)
def test_a_wrong_member_is_named(progress, total, message, problem):
    with pytest.raises(ProgressError, match=f"^{problem}$"):
        parse_report(progress, total, message)


def test_a_message_of_exactly_the_bound_is_kept():
    text = "é" * MAX_PROGRESS_MESSAGE_CHARS  # characters, not bytes
    assert parse_report(raw(1), UNSET, raw(text)).message == text


def test_the_notification_carries_the_token_as_the_agent_sent_it():
    sent = json.loads(progress_notification(b'"tok"', Report(2.0, 4.0, "half")))
    assert sent == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "tok", "progress": 2.0, "total": 4.0, "message": "half"},
    }
    sent = json.loads(progress_notification(b"17", Report(1.0)))
    assert sent["params"] == {"progressToken": 17, "progress": 1.0}


# -- the pace ------------------------------------------------------------------------------------


def test_ten_go_at_once_and_the_eleventh_waits_replaced_by_a_later_one():
    pace = Progress(b"1")
    for step in range(PROGRESS_PER_SECOND):
        assert pace.take(Report(step), NOW + step * 0.01)  # a burst goes as it came
    assert not pace.take(Report(10.0), NOW + 0.5)
    assert not pace.take(Report(11.0), NOW + 0.6)
    assert pace.pending == Report(11.0)
    assert pace.next_at() == NOW + 1.0  # a second after the oldest of the ten
    assert pace.due(NOW + 0.99) is None
    assert pace.due(NOW + 1.0) == Report(11.0)
    assert pace.pending is None
    assert pace.next_at() == pytest.approx(NOW + 1.01)  # the window moved on by one
    assert not pace.take(Report(12.0), NOW + 1.005)
    assert pace.flush() == Report(12.0) and pace.flush() is None


def test_a_report_that_may_go_passes_the_one_waiting():
    pace = Progress(b"1")
    for step in range(PROGRESS_PER_SECOND):
        pace.take(Report(step), NOW)
    assert not pace.take(Report(10.0), NOW + 0.5)
    assert pace.take(Report(11.0), NOW + 1.0)  # the window has room: it goes, and 10 never will
    assert pace.pending is None and pace.due(NOW + 5) is None


def test_a_report_not_above_the_last_is_dropped():
    pace = Progress(b"1")
    assert pace.take(Report(5.0), NOW)
    for later, step in ((NOW + 1, 5.0), (NOW + 2, 4.0), (NOW + 3, -1.0)):
        assert not pace.take(Report(step), later)
        assert pace.pending is None
    assert pace.take(Report(5.5), NOW + 4)


# -- the bridge's part: to the call, at the pace, before the answer -----------------------------


def running_call(bridge, *, wants_stream=True, token=b'"t"', declare=True):
    channel, link = connect(bridge)
    register(channel, tool("work"), **({"progress": True} if declare else {}))
    call = RecordingWaiter(wants_stream)
    if token is not None:
        call.progress = Progress(token)
    bridge.start_call(channel, channel.toolset.tools["work"], b"{}", call, NOW)
    return channel, call


def report(channel, call, progress, now, **members):
    send(channel, {"type": "progress", "id": call.id, "progress": progress, **members}, now)


def test_a_report_starts_the_stream_at_once_and_reaches_the_call():
    bridge = make_bridge()
    channel, call = running_call(bridge)
    report(channel, call, 1, NOW + 0.01, total=2, message="half")
    assert call.events == [("slow",), ("progress", 1.0, 2.0, "half")]
    assert call.streaming


def test_a_flood_is_paced_and_the_waiting_report_goes_when_due_or_before_the_answer():
    wake = RecordingWake()
    bridge = make_bridge(wake=wake, app_idle_timeout=10_000, app_soft_seconds=10_000)
    channel, call = running_call(bridge)
    for step in range(1, 10_001):
        report(channel, call, step, NOW + 0.01)
    assert call.events == [("slow",), *(("progress", float(step), None, None) for step in range(1, 11))]
    assert len(bridge._progress_waiting) == 1  # one report held, however many came
    due = NOW + 1.01
    assert due in wake.times
    assert bridge.next_deadline() == pytest.approx(due)
    bridge.on_timer(due)
    assert call.events[-1] == ("progress", 10_000.0, None, None)
    assert not bridge._progress_waiting
    for step in range(10_001, 10_021):
        report(channel, call, step, due + 0.01)
    assert call.progress.pending == Report(10_020.0)  # ten went within the second again
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}}, due + 0.02)
    assert call.events[-2:] == [("progress", 10_020.0, None, None), ("result", b'{"content":[]}', False)]


def test_a_report_waiting_for_a_call_that_ended_unanswered_is_dropped():
    bridge = make_bridge(app_idle_timeout=10_000, app_soft_seconds=10_000)
    channel, call = running_call(bridge)
    for step in range(1, 12):
        report(channel, call, step, NOW)
    assert call.progress.pending is not None
    channel.close(1000, "bye", NOW + 0.02)
    channel.connection_lost(NOW + 0.02)
    assert call.events[-1] == ("error", "The application disconnected before answering.")
    bridge.on_timer(NOW + 1)
    assert not bridge._progress_waiting
    assert ("progress", 11.0, None, None) not in call.events


def test_without_a_token_or_a_stream_nothing_is_sent():
    bridge = make_bridge()
    channel, call = running_call(bridge, token=None)
    report(channel, call, 1, NOW)
    assert call.events == [] and not call.streaming
    channel, call = running_call(make_bridge(), wants_stream=False)
    report(channel, call, 1, NOW)
    assert not call.streaming


def test_an_app_that_did_not_declare_progress_is_not_heard():
    bridge = make_bridge()
    channel, call = running_call(bridge, declare=False)
    send(channel, {"type": "progress", "id": call.id, "progress": "not even a number"}, NOW)
    assert call.events == []
    assert bridge.apps["app-1"] is channel  # not closed


@pytest.mark.parametrize("flag", ["progress", "trace"])
@pytest.mark.parametrize("value", [1, "true", None])
def test_a_register_flag_that_is_not_a_boolean_closes_4400(flag, value):
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("work"), **{flag: value})
    assert link.close() == (4400, f"register: {flag} must be true or false")
