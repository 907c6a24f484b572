"""The bridge's state without sockets or clock (ClientMCP v1 §3.1, §4.3-§4.4, §5; docs/protocol.md)."""

from __future__ import annotations

import json
import math

import pytest
from fakes import (
    NOW,
    RecordingStream,
    RecordingWaiter,
    RecordingWake,
    client_text,
    connect,
    is_open,
    make_bridge,
    register,
    send,
    tool,
)
from wire import Op, client_frame

from clientmcp_fast.core import outcomes
from clientmcp_fast.core.apps import NO_CALLS
from clientmcp_fast.core.bridge import NOTIFICATION_KEEPALIVE_SECONDS
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.speedups import call_message

DISCONNECTED = ("error", "The application disconnected before answering.")
# Idle and congestion sweeps far apart, so that call deadlines are the only ones near.
QUIET = {"app_idle_timeout": 10_000, "app_soft_seconds": 10_000}


def online(bridge, client_id="app-1", *names, now=NOW):
    """An app connected as `client_id` that registered tools `names` (none: no register at all)."""
    channel, link = connect(bridge, client_id, now=now)
    if names:
        register(channel, *(tool(n) for n in names), now=now)
    link.new_frames()
    return channel, link


def turn(bridge, now=NOW) -> None:
    """The loop's turn ends: the bridge does what it asked to do at once (announcing changes)."""
    assert bridge.next_deadline() == -math.inf
    bridge.on_timer(now)


def listen(bridge, client_id="app-1", now=NOW) -> RecordingStream:
    stream = RecordingStream()
    assert bridge.add_stream(client_id, stream, now)
    return stream


def start(bridge, channel, name="echo", arguments=b"{}", *, wants_stream=False, now=NOW):
    """Start a call; the call is its own waiter, returned as None when it failed at once."""
    waiter = RecordingWaiter(wants_stream)
    started = bridge.start_call(channel, channel.toolset.tools[name], arguments, waiter, now)
    return (waiter if started else None), waiter


def advance(bridge, until: float) -> None:
    """Run the timer as the I/O layer does: at each deadline the bridge reports, up to `until`."""
    while (deadline := bridge.next_deadline()) is not None and deadline <= until:
        bridge.on_timer(deadline)
        after = bridge.next_deadline()
        assert after is None or after > deadline, "on_timer left work due at the time it was run"


def sent_messages(link) -> list:
    return [json.loads(payload) for opcode, payload in link.new_frames() if opcode == Op.TEXT]


# -- ClientMCP v1 §3.1: the newest connection wins (4409) --------------------------------------


def test_a_second_connection_replaces_the_first_with_4409():
    bridge = make_bridge()
    _, older_link = online(bridge, "app-1", "echo")
    newer, newer_link = connect(bridge, "app-1")
    assert older_link.close() == (4409, "replaced by a newer connection for this client ID")
    assert bridge.apps == {"app-1": newer}
    assert is_open(newer)
    assert newer_link.data == b""


def test_replacement_fails_calls_in_flight_at_once():
    bridge = make_bridge()
    older, _ = online(bridge, "app-1", "echo")
    _, first = start(bridge, older)
    _, second = start(bridge, older)
    connect(bridge, "app-1")
    assert first.events == [DISCONNECTED]
    assert second.events == [DISCONNECTED]
    assert len(bridge.calls) == 0
    assert older.calls == {}


def test_a_late_result_from_the_replaced_connection_is_ignored():
    bridge = make_bridge()
    older, _ = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, older)
    connect(bridge, "app-1")
    send(older, {"type": "result", "id": call.id, "result": {"content": []}})
    assert waiter.events == [DISCONNECTED]


def test_replacing_an_app_that_had_tools_announces_list_changed():
    bridge = make_bridge()
    stream = listen(bridge)
    online(bridge, "app-1", "echo")
    turn(bridge)
    assert stream.events == ["tools_changed"]
    connect(bridge, "app-1")
    turn(bridge)
    assert stream.events == ["tools_changed", "tools_changed"]


@pytest.mark.parametrize("registered", [False, True], ids=["never-registered", "registered-empty"])
def test_replacing_an_app_without_tools_announces_nothing(registered):
    bridge = make_bridge()
    stream = listen(bridge)
    older, _ = online(bridge, "app-1")
    if registered:
        register(older)
    connect(bridge, "app-1")
    assert stream.events == []


def test_the_replaced_connection_ending_leaves_the_newer_one_alone():
    bridge = make_bridge()
    stream = listen(bridge)
    older, _ = online(bridge, "app-1", "echo")
    turn(bridge)
    newer, _ = connect(bridge, "app-1")
    turn(bridge)
    register(newer, tool("echo"))
    turn(bridge)
    assert stream.events == ["tools_changed"] * 3  # register, replacement, new register
    older.connection_lost(NOW)
    assert bridge.apps == {"app-1": newer}
    assert stream.events == ["tools_changed"] * 3
    assert is_open(newer)


def test_a_newer_connection_starts_from_an_empty_tool_set():
    bridge = make_bridge()
    online(bridge, "app-1", "echo")
    newer, _ = connect(bridge, "app-1")
    assert newer.toolset is None


def test_other_client_ids_are_not_replaced():
    bridge = make_bridge()
    a, a_link = online(bridge, "a", "echo")
    b, _ = online(bridge, "b", "echo")
    assert a_link.close() is None
    assert bridge.apps == {"a": a, "b": b}


# -- ClientMCP v1 §5.3: disconnection ----------------------------------------------------------


def test_a_disconnection_fails_calls_in_flight_with_disconnected():
    bridge = make_bridge()
    channel, _ = online(bridge, "app-1", "echo")
    _, waiter = start(bridge, channel)
    channel.connection_lost(NOW)
    assert waiter.events == [DISCONNECTED]
    assert Outcome.DISCONNECTED.text == "The application disconnected before answering."
    assert bridge.apps == {}
    assert len(bridge.calls) == 0


def test_a_peer_close_fails_calls_and_announces():
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1", "echo")
    turn(bridge)
    _, waiter = start(bridge, channel)
    # The app's own close frame (1000), masked as every client frame is.
    channel.receive_data(client_frame(Op.CLOSE, b"\x03\xe8bye"), NOW)
    assert waiter.events == [DISCONNECTED]
    turn(bridge)
    assert stream.events == ["tools_changed", "tools_changed"]
    assert bridge.apps == {}


def test_a_disconnection_with_tools_announces_list_changed():
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1", "echo")
    turn(bridge)
    channel.connection_lost(NOW)
    turn(bridge)
    assert stream.events == ["tools_changed", "tools_changed"]


@pytest.mark.parametrize("registered", [False, True], ids=["never-registered", "registered-empty"])
def test_a_disconnection_without_tools_announces_nothing(registered):
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1")
    if registered:
        register(channel)
    channel.connection_lost(NOW)
    assert stream.events == []


def test_a_closed_app_is_no_longer_online():
    bridge = make_bridge()
    channel, _ = online(bridge, "app-1", "echo")
    channel.close(1000, "done", NOW)
    assert bridge.apps == {}


# -- docs/protocol.md, Notification streams: what counts as a change of the tool set -----------


def test_a_register_identical_to_the_current_set_announces_nothing():
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1", "a", "b")
    turn(bridge)
    register(channel, tool("a"), tool("b"))
    register(channel, tool("a"), tool("b"), instructions="only the instructions changed")
    assert bridge.next_deadline() != -math.inf  # nothing to announce
    assert stream.events == ["tools_changed"]


@pytest.mark.parametrize(
    "second",
    [
        [tool("a")],
        [tool("b"), tool("a")],
        [tool("a"), tool("b"), tool("c")],
        [tool("a"), tool("b", title="B")],
        [],
    ],
    ids=["removed", "reordered", "added", "changed", "emptied"],
)
def test_a_register_with_different_tools_announces_list_changed(second):
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1", "a", "b")
    turn(bridge)
    register(channel, *second)
    turn(bridge)
    assert stream.events == ["tools_changed", "tools_changed"]


def test_a_new_connection_registering_an_empty_set_announces_nothing():
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1")
    register(channel)
    assert stream.events == []


def test_a_new_connection_registering_tools_announces_list_changed():
    bridge = make_bridge()
    stream = listen(bridge)
    online(bridge, "app-1", "echo")
    turn(bridge)
    assert stream.events == ["tools_changed"]


def test_every_stream_of_the_client_id_hears_it():
    bridge = make_bridge()
    streams = [listen(bridge) for _ in range(3)]
    online(bridge, "app-1", "echo")
    turn(bridge)
    assert [s.events for s in streams] == [["tools_changed"]] * 3


def test_streams_of_another_client_id_never_hear_it():
    bridge = make_bridge()
    mine = listen(bridge, "app-1")
    other = listen(bridge, "app-2")
    channel, _ = online(bridge, "app-1", "echo")
    turn(bridge)
    register(channel, tool("other"))
    turn(bridge)
    connect(bridge, "app-1")
    turn(bridge)
    assert mine.events == ["tools_changed"] * 3
    assert other.events == []


def test_changes_within_one_turn_are_announced_once_when_it_ends():
    """A burst of registers read in one turn costs each stream one list_changed, not one each."""
    wake = RecordingWake()
    bridge = make_bridge(wake=wake)
    streams = [listen(bridge) for _ in range(64)]
    channel, _ = online(bridge, "app-1", "a")
    for number in range(1_000):
        register(channel, tool(f"t{number % 2}"))
    assert [s.events for s in streams] == [[]] * 64  # nothing yet, within the turn
    assert wake.times.count(-math.inf) == 1  # asked once to be woken at once
    turn(bridge)
    assert [s.events for s in streams] == [["tools_changed"]] * 64
    assert bridge.next_deadline() != -math.inf


def test_a_change_with_no_stream_listening_asks_for_nothing():
    wake = RecordingWake()
    bridge = make_bridge(wake=wake)
    channel, _ = online(bridge, "app-1", "a")
    register(channel, tool("b"))
    assert -math.inf not in wake.times


def test_a_removed_stream_hears_nothing_more():
    bridge = make_bridge()
    stream = listen(bridge)
    bridge.remove_stream("app-1", stream)
    online(bridge, "app-1", "echo")
    assert stream.events == []
    assert bridge.stream_count == 0
    assert bridge.streams == {}


# -- ClientMCP v1 §3.2 and docs/protocol.md, Call outcomes: starting a call --------------------


def test_the_call_message_is_exact():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "getBalance")
    arguments = b'{ "chainId" : 1,\n "x": [1, 2.50] }'
    call, waiter = start(bridge, channel, "getBalance", arguments)
    assert link.new_frames() == [
        (
            Op.TEXT,
            b'{"type":"call","id":"'
            + call.id.encode()
            + b'","name":"getBalance","arguments":'
            + arguments
            + b"}",
        )
    ]
    assert channel.calls == {call.id: call}
    assert waiter.events == []


def test_an_app_gets_its_own_calls_at_its_first_call_and_the_shared_empty_one_stays_empty():
    """Idle apps share one empty `calls` (core/apps.py, NO_CALLS); a call never lands in it."""
    bridge = make_bridge()
    a, _ = online(bridge, "a", "echo")
    b, _ = online(bridge, "b", "echo")
    assert a.calls is NO_CALLS and b.calls is NO_CALLS
    call, _ = start(bridge, a)
    assert a.calls == {call.id: call} and a.calls is not NO_CALLS
    assert b.calls is NO_CALLS and NO_CALLS == {}
    a.receive_data(
        client_text(b'{"type":"result","id":"' + call.id.encode() + b'","result":{"content":[]}}'), NOW
    )
    assert a.calls == {} and a.calls is not NO_CALLS and NO_CALLS == {}


def test_call_ids_are_unique_across_apps():
    bridge = make_bridge()
    a, _ = online(bridge, "a", "echo")
    b, _ = online(bridge, "b", "echo")
    ids = [start(bridge, app)[0].id for app in (a, b, a, b)]
    assert len(set(ids)) == 4
    assert all(isinstance(i, str) for i in ids)


def test_a_result_completes_its_waiter_with_the_raw_result():
    bridge = make_bridge()
    channel, _ = online(bridge, "app-1", "echo")
    first, first_waiter = start(bridge, channel)
    second, second_waiter = start(bridge, channel)
    raw = b'{"content":[{"type":"text","text":"2"}], "_meta": {"k": 1}}'
    channel.receive_data(
        client_text(b'{"type":"result","id":"' + second.id.encode() + b'","result":' + raw + b"}"),
        NOW,
    )
    assert second_waiter.events == [("result", raw, False)]
    assert first_waiter.events == []
    assert list(channel.calls) == [first.id]
    assert len(bridge.calls) == 1


def test_a_second_result_for_the_same_id_is_ignored():
    bridge = make_bridge()
    channel, _ = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel)
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}})
    send(channel, {"type": "result", "id": call.id, "result": {"content": [], "isError": True}})
    assert waiter.events == [("result", b'{"content":[]}', False)]
    assert is_open(channel)


def test_a_call_to_a_tool_a_later_register_removed_still_completes():
    bridge = make_bridge()
    channel, _ = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel)
    register(channel, tool("other"))
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}})
    assert waiter.events == [("result", b'{"content":[]}', False)]


def test_too_many_calls_in_flight_are_busy():
    bridge = make_bridge(max_calls_per_app=2)
    channel, link = online(bridge, "app-1", "echo")
    start(bridge, channel)
    start(bridge, channel)
    link.new_frames()
    call, waiter = start(bridge, channel)
    assert call is None
    assert waiter.events == [("error", "The application is busy; try again.")]
    assert link.new_frames() == []
    assert len(bridge.calls) == 2


def test_the_call_limit_is_per_app():
    bridge = make_bridge(max_calls_per_app=1)
    a, _ = online(bridge, "a", "echo")
    b, _ = online(bridge, "b", "echo")
    assert start(bridge, a)[0] is not None
    assert start(bridge, b)[0] is not None
    assert start(bridge, a)[0] is None


def test_a_finished_call_frees_its_place():
    bridge = make_bridge(max_calls_per_app=1)
    channel, _ = online(bridge, "app-1", "echo")
    call, _ = start(bridge, channel)
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}})
    again, waiter = start(bridge, channel)
    assert again is not None
    assert waiter.events == []


def test_a_congested_app_is_busy_until_drained():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    channel.congested(NOW)
    call, waiter = start(bridge, channel)
    assert call is None
    assert waiter.events == [("error", Outcome.BUSY.text)]
    assert link.new_frames() == []
    channel.drained()
    call, waiter = start(bridge, channel)
    assert call is not None
    assert waiter.events == []


def test_a_call_message_of_exactly_4_mib_is_sent():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    seq = bridge.calls._seq + 1
    call_id = str(seq).encode()
    overhead = len(call_message(call_id, b"echo", b'{"s":""}'))
    arguments = b'{"s":"' + b"x" * (MAX_MESSAGE_BYTES - overhead) + b'"}'
    call, waiter = start(bridge, channel, arguments=arguments)
    assert call is not None and call.id.encode() == call_id
    ((opcode, payload),) = link.new_frames()
    assert opcode == Op.TEXT
    assert len(payload) == MAX_MESSAGE_BYTES
    assert waiter.events == []


def test_a_call_message_over_4_mib_is_too_large():
    bridge = make_bridge(**QUIET)
    channel, link = online(bridge, "app-1", "echo")
    seq = bridge.calls._seq + 1
    overhead = len(call_message(str(seq).encode(), b"echo", b'{"s":""}'))
    arguments = b'{"s":"' + b"x" * (MAX_MESSAGE_BYTES - overhead + 1) + b'"}'
    call, waiter = start(bridge, channel, arguments=arguments)
    assert call is None
    assert waiter.events == [("error", "The call is too large to deliver (over 4 MiB).")]
    assert link.new_frames() == []
    assert channel.calls == {}
    assert len(bridge.calls) == 0
    assert bridge.next_deadline() == NOW + 5  # the sweep only: the refused call left no deadline


def test_a_bridge_shutting_down_refuses_calls():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    bridge.shutting_down = True
    call, waiter = start(bridge, channel)
    assert call is None
    assert waiter.events == [("error", "The bridge is shutting down.")]
    assert link.new_frames() == []


# -- ClientMCP v1 §5.2 and docs/protocol.md, Call outcomes: timeouts ---------------------------


def test_a_call_times_out_with_a_tool_error_and_a_cancel():
    bridge = make_bridge(**QUIET)
    channel, link = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel)
    link.new_frames()
    bridge.on_timer(NOW + 119.9)
    assert waiter.events == []
    bridge.on_timer(NOW + 120)
    assert waiter.events == [("error", "The application did not answer within 120 s.")]
    assert link.new_frames() == [(Op.TEXT, b'{"type":"cancel","id":"' + call.id.encode() + b'"}')]
    assert channel.calls == {}
    assert len(bridge.calls) == 0


def test_the_timeout_text_uses_the_setting():
    bridge = make_bridge(call_timeout=2.5, **QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    _, waiter = start(bridge, channel)
    bridge.on_timer(NOW + 2.5)
    assert waiter.events == [("error", "The application did not answer within 2.5 s.")]
    assert outcomes.timed_out(120) == "The application did not answer within 120 s."
    assert outcomes.timed_out(30.0) == "The application did not answer within 30 s."


def test_a_result_after_the_timeout_is_ignored():
    bridge = make_bridge(call_timeout=5, **QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel)
    bridge.on_timer(NOW + 5)
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}}, NOW + 6)
    assert waiter.events == [("error", outcomes.timed_out(5))]
    assert is_open(channel)


def test_calls_time_out_in_start_order():
    bridge = make_bridge(call_timeout=10, **QUIET)
    channel, link = online(bridge, "app-1", "echo")
    first, first_waiter = start(bridge, channel, now=NOW)
    second, second_waiter = start(bridge, channel, now=NOW + 3)
    link.new_frames()
    bridge.on_timer(NOW + 10)
    assert first_waiter.events == [("error", outcomes.timed_out(10))]
    assert second_waiter.events == []
    assert sent_messages(link) == [{"type": "cancel", "id": first.id}]
    bridge.on_timer(NOW + 13)
    assert second_waiter.events == [("error", outcomes.timed_out(10))]
    assert sent_messages(link) == [{"type": "cancel", "id": second.id}]


def test_next_deadline_reports_the_earliest_deadline():
    bridge = make_bridge(call_timeout=3, **QUIET)
    assert bridge.next_deadline() is None
    channel, _ = online(bridge, "app-1", "echo")
    sweep = bridge.next_deadline()
    assert sweep == NOW + 5  # the idle sweep, at most every 5 s
    call, _ = start(bridge, channel, now=NOW)
    assert bridge.next_deadline() == NOW + 3
    start(bridge, channel, wants_stream=True, now=NOW + 0.5)
    assert bridge.next_deadline() == NOW + 1.5  # the streaming switch of the second call
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}})
    assert bridge.next_deadline() == NOW + 1.5


def test_wake_is_called_when_a_first_deadline_appears():
    wake = RecordingWake()
    bridge = make_bridge(wake=wake, call_timeout=3, **QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    assert wake.times == [NOW + 5]
    start(bridge, channel, now=NOW)
    assert wake.times == [NOW + 5, NOW + 3]
    start(bridge, channel, now=NOW + 1)
    assert wake.times == [NOW + 5, NOW + 3]  # later than the first call's: nothing new
    start(bridge, channel, wants_stream=True, now=NOW + 1)
    assert wake.times == [NOW + 5, NOW + 3, NOW + 2]


def test_wake_is_called_for_the_first_stream():
    wake = RecordingWake()
    bridge = make_bridge(wake=wake)
    listen(bridge)
    listen(bridge)
    assert wake.times == [NOW + NOTIFICATION_KEEPALIVE_SECONDS]


# -- ClientMCP v1 §4.3 and docs/protocol.md, Call outcomes: the switch to streaming ------------


def test_a_streaming_waiter_gets_call_slow_after_a_second_then_ticks():
    bridge = make_bridge(**QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    _, waiter = start(bridge, channel, wants_stream=True)
    bridge.on_timer(NOW + 0.99)
    assert waiter.events == []
    bridge.on_timer(NOW + 1)
    assert waiter.events == [("slow",)]
    assert bridge.next_deadline() == NOW + 2
    bridge.on_timer(NOW + 1.5)
    assert waiter.events == [("slow",)]
    bridge.on_timer(NOW + 2)
    assert waiter.events == [("slow",), ("tick",)]
    bridge.on_timer(NOW + 3)
    bridge.on_timer(NOW + 4)
    assert waiter.events == [("slow",), ("tick",), ("tick",), ("tick",)]


def test_a_streamed_call_still_gets_its_result():
    bridge = make_bridge(**QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel, wants_stream=True)
    bridge.on_timer(NOW + 1)
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}}, NOW + 1.5)
    bridge.on_timer(NOW + 2)
    assert waiter.events == [("slow",), ("result", b'{"content":[]}', False)]


def test_a_waiter_without_wants_stream_never_switches():
    bridge = make_bridge(call_timeout=10, **QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    _, waiter = start(bridge, channel, wants_stream=False)
    for t in range(1, 10):
        bridge.on_timer(NOW + t)
    assert waiter.events == []
    bridge.on_timer(NOW + 10)
    assert waiter.events == [("error", outcomes.timed_out(10))]


def test_only_streaming_waiters_tick():
    bridge = make_bridge(**QUIET)
    channel, _ = online(bridge, "app-1", "echo")
    _, plain = start(bridge, channel)
    _, streaming = start(bridge, channel, wants_stream=True)
    for t in (1, 2, 3):
        bridge.on_timer(NOW + t)
    assert plain.events == []
    assert streaming.events == [("slow",), ("tick",), ("tick",)]


# -- docs/protocol.md, Mapping: abandoning a call ----------------------------------------------


def test_abandon_sends_cancel_and_ignores_a_late_result():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel)
    link.new_frames()
    bridge.abandon(call, NOW)
    assert link.new_frames() == [(Op.TEXT, b'{"type":"cancel","id":"' + call.id.encode() + b'"}')]
    assert len(bridge.calls) == 0
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}})
    assert waiter.events == []
    assert is_open(channel)


def test_abandoning_a_finished_call_sends_nothing():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    call, _ = start(bridge, channel)
    send(channel, {"type": "result", "id": call.id, "result": {"content": []}})
    link.new_frames()
    bridge.abandon(call, NOW)
    bridge.abandon(call, NOW)
    assert link.new_frames() == []


def test_an_abandoned_call_does_not_time_out():
    bridge = make_bridge(call_timeout=5, **QUIET)
    channel, link = online(bridge, "app-1", "echo")
    call, waiter = start(bridge, channel, wants_stream=True)
    bridge.abandon(call, NOW)
    link.new_frames()
    bridge.on_timer(NOW + 10)
    assert waiter.events == []
    assert link.new_frames() == []


# -- docs/protocol.md, Close codes: idle and congested apps ------------------------------------


def test_a_silent_app_gets_4408_on_the_sweep():
    bridge = make_bridge()  # defaults: idle 90 s, a sweep every 30 s / 16 = 1.875 s
    _, link = online(bridge, "app-1", "echo")
    advance(bridge, NOW + 89.99)
    assert link.close() is None
    advance(bridge, NOW + 90 + 1.875)
    assert link.close() == (4408, "nothing received for 90 s")
    assert bridge.apps == {}


def test_an_app_that_pinged_is_not_idle():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    channel.receive_data(client_text(b'{"type":"ping"}'), NOW + 50)
    advance(bridge, NOW + 139.99)
    assert link.close() is None
    advance(bridge, NOW + 140 + 1.875)
    assert link.close() == (4408, "nothing received for 90 s")


def test_the_idle_timeout_is_a_setting():
    bridge = make_bridge(app_idle_timeout=0.3)
    _, link = online(bridge, "app-1")
    advance(bridge, NOW + 0.29)
    assert link.close() is None
    advance(bridge, NOW + 0.3 + 0.3 / 16)
    assert link.close() == (4408, "nothing received for 0.3 s")


def test_only_the_silent_app_is_closed():
    bridge = make_bridge()
    _, quiet = online(bridge, "quiet")
    talker, talker_link = online(bridge, "talker")
    send(talker, {"type": "ping"}, NOW + 60)
    advance(bridge, NOW + 92)
    assert quiet.close()[0] == 4408
    assert talker_link.close() is None


def test_an_app_congested_longer_than_the_soft_period_gets_4429():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    channel.congested(NOW + 10)
    advance(bridge, NOW + 39.99)
    assert link.close() is None
    advance(bridge, NOW + 40 + 1.875)
    assert link.close() == (4429, "the app does not read: unsent data above the soft limit for 30 s")


def test_a_drained_app_is_not_closed():
    bridge = make_bridge()
    channel, link = online(bridge, "app-1", "echo")
    channel.congested(NOW + 10)
    channel.drained()
    advance(bridge, NOW + 60)
    assert link.close() is None


def test_an_overflowed_app_gets_4429_at_once():
    bridge = make_bridge()
    stream = listen(bridge)
    channel, link = online(bridge, "app-1", "echo")
    turn(bridge)
    _, waiter = start(bridge, channel)
    channel.overflowed(NOW)
    assert link.close() == (4429, "the app does not read: unsent data passed the hard limit")
    assert waiter.events == [DISCONNECTED]
    turn(bridge)
    assert stream.events == ["tools_changed", "tools_changed"]


# -- docs/protocol.md, Notification streams ----------------------------------------------------


def test_streams_per_client_id_are_limited():
    bridge = make_bridge(max_streams_per_client=2)
    assert bridge.add_stream("a", RecordingStream(), NOW)
    assert bridge.add_stream("a", RecordingStream(), NOW)
    assert not bridge.add_stream("a", RecordingStream(), NOW)
    assert bridge.add_stream("b", RecordingStream(), NOW)
    assert bridge.stream_count == 3


def test_streams_in_total_are_limited():
    bridge = make_bridge(max_streams=3)
    for client_id in ("a", "b", "c"):
        assert bridge.add_stream(client_id, RecordingStream(), NOW)
    assert not bridge.add_stream("d", RecordingStream(), NOW)
    assert not bridge.add_stream("a", RecordingStream(), NOW)


def test_a_refused_stream_hears_nothing():
    bridge = make_bridge(max_streams_per_client=1)
    listen(bridge)
    refused = RecordingStream()
    assert not bridge.add_stream("app-1", refused, NOW)
    online(bridge, "app-1", "echo")
    assert refused.events == []


def test_removing_a_stream_frees_its_place():
    bridge = make_bridge(max_streams_per_client=1, max_streams=1)
    stream = listen(bridge)
    bridge.remove_stream("app-1", stream)
    bridge.remove_stream("app-1", stream)  # twice is harmless
    assert bridge.stream_count == 0
    assert bridge.add_stream("app-2", RecordingStream(), NOW)


def test_streams_get_a_keep_alive_every_15_seconds():
    bridge = make_bridge()
    stream = listen(bridge)
    assert NOTIFICATION_KEEPALIVE_SECONDS == 15.0
    assert bridge.next_deadline() == NOW + 15
    bridge.on_timer(NOW + 14.9)
    assert stream.events == []
    bridge.on_timer(NOW + 15)
    assert stream.events == ["keep_alive"]
    assert bridge.next_deadline() == NOW + 30
    bridge.on_timer(NOW + 30)
    assert stream.events == ["keep_alive", "keep_alive"]


def test_streams_stay_open_while_the_app_is_offline():
    bridge = make_bridge()
    stream = listen(bridge)
    channel, _ = online(bridge, "app-1", "echo")
    turn(bridge)
    channel.connection_lost(NOW)
    bridge.on_timer(NOW + 15)
    assert stream.events == ["tools_changed", "tools_changed", "keep_alive"]
    assert bridge.stream_count == 1


# -- docs/protocol.md, Shutdown ----------------------------------------------------------------


def test_shutdown_fails_calls_closes_apps_and_ends_streams():
    bridge = make_bridge()
    stream = listen(bridge)
    other_stream = listen(bridge, "app-2")
    a, a_link = online(bridge, "app-1", "echo")
    b, b_link = online(bridge, "app-2", "echo")
    _, waiter_a = start(bridge, a)
    _, waiter_b = start(bridge, b, wants_stream=True)
    bridge.shutdown(NOW)
    assert waiter_a.events == [("error", "The bridge is shutting down.")]
    assert waiter_b.events == [("error", "The bridge is shutting down.")]
    assert a_link.close() == (1001, "bridge shutting down")
    assert b_link.close() == (1001, "bridge shutting down")
    assert stream.events[-1] == "end"
    assert other_stream.events[-1] == "end"
    assert bridge.apps == {}
    assert bridge.streams == {}
    assert bridge.stream_count == 0
    assert len(bridge.calls) == 0
    assert bridge.shutting_down


def test_after_shutdown_nothing_is_due():
    bridge = make_bridge()
    listen(bridge)
    channel, _ = online(bridge, "app-1", "echo")
    _, waiter = start(bridge, channel, wants_stream=True)
    bridge.shutdown(NOW)
    bridge.on_timer(NOW + 200)
    assert waiter.events == [("error", Outcome.SHUTTING_DOWN.text)]
