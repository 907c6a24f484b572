"""W3C trace context checks and the tracer port, without sockets or clock (docs/protocol.md, Trace context)."""

from __future__ import annotations

import json

import pytest
from fakes import NOW, RecordingWaiter, connect, make_bridge, register, tool

from clientmcp_fast.core.bridge import Bridge
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.tracing import (
    MAX_TRACESTATE_CHARS,
    CallTracing,
    valid_traceparent,
    valid_tracestate,
)

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# Eight members of 63 characters and one of 64, with their commas: exactly the bound.
AT_THE_BOUND = ",".join(f"k{i}=" + "x" * 60 for i in range(7)) + ",k7=" + "x" * 61
assert len(AT_THE_BOUND) == MAX_TRACESTATE_CHARS


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        (PARENT, PARENT),
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        ),
        ("cc" + PARENT[2:] + "-later-fields", "cc" + PARENT[2:]),  # W3C §4.3: a later version read as 00
        ("cc" + PARENT[2:], "cc" + PARENT[2:]),
        ("cc" + PARENT[2:] + "later", None),  # what follows the flags must start with a dash
        (PARENT + "-x", None),  # version 00 has exactly four fields
        ("ff" + PARENT[2:], None),
        (PARENT.upper(), None),
        (PARENT[:-1], None),
        (PARENT.replace("4bf92f3577b34da6a3ce929d0e0e4736", "0" * 32), None),
        (PARENT.replace("00f067aa0ba902b7", "0" * 16), None),
        (PARENT.replace("-", "_"), None),
        (" " + PARENT, None),
        ("cc" + PARENT[2:] + "-" + "x" * 500, None),  # longer than the 512 read at most
        ("cc" + PARENT[2:] + "-é", None),  # a later version's fields are ASCII too
        (PARENT[:-2] + "é", None),
        (55, None),
        (None, None),
        (bytearray(PARENT.encode()), None),  # a header's value is bytes, `_meta`'s a string
    ],
)
def test_traceparent(value, kept):
    """Its bytes are kept, whether a header's bytes or `_meta`'s string held it."""
    expected = None if kept is None else kept.encode("ascii")
    assert valid_traceparent(value) == expected
    if type(value) is str:
        assert valid_traceparent(value.encode("utf-8")) == expected


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("rojo=00f067aa0ba902b7", "rojo=00f067aa0ba902b7"),
        ("rojo=1, congo=2", "rojo=1,congo=2"),  # optional whitespace around members
        ("rojo=1,,congo=2", "rojo=1,congo=2"),  # an empty member is allowed and skipped
        ("tenant@system=x", "tenant@system=x"),
        ('a=say "hi"\\', 'a=say "hi"\\'),  # quotes and backslashes are values W3C allows
        ("a=1,a=2", None),
        ("=1", None),
        ("A=1", None),
        ("a=", None),
        ("a=ends with space ", "a=ends with space"),  # trailing whitespace is the list's, not the value's
        ("a=x,y", None),
        ("a=é", None),
        (",".join(f"k{i}=v" for i in range(33)), None),
        (",".join(f"k{i}=v" for i in range(32)), ",".join(f"k{i}=v" for i in range(32))),
        (AT_THE_BOUND, AT_THE_BOUND),
        (AT_THE_BOUND + "x", None),
        ("a=" + "x" * 256, "a=" + "x" * 256),
        ("a=" + "x" * 257, None),  # a value is at most 256 characters
        ("", None),
        (7, None),
    ],
)
def test_tracestate(value, kept):
    assert valid_tracestate(value) == kept


class RecordingTracing(CallTracing):
    """A tracer that records what the bridge tells it, and gives the app a context of its own."""

    def __init__(self) -> None:
        self.told: list[tuple] = []

    def started(self, call) -> None:
        self.told.append(("started", call.traceparent))
        call.span = "span"
        call.traceparent = b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"
        call.tracestate = None

    def ended(self, call, outcome) -> None:
        self.told.append(("ended", call.span, Outcome(outcome)))


def traced_bridge(tracing: CallTracing | None) -> Bridge:
    bridge = make_bridge()
    bridge.tracing = tracing
    return bridge


def test_the_tracer_hears_each_call_and_its_context_reaches_an_app_that_asked():
    tracing = RecordingTracing()
    bridge = traced_bridge(tracing)
    channel, link = connect(bridge)
    register(channel, tool("work"), trace=True)
    call = RecordingWaiter()
    call.traceparent = PARENT.encode()
    bridge.start_call(channel, channel.toolset.tools["work"], b"{}", call, NOW)
    sent = link.messages()[-1]
    assert sent["traceparent"] == "00-" + "1" * 32 + "-" + "2" * 16 + "-01" and "tracestate" not in sent
    channel.calls.pop(call.id)
    bridge.fail(call, Outcome.DISCONNECTED, NOW)
    assert tracing.told == [("started", PARENT.encode()), ("ended", "span", Outcome.DISCONNECTED)]


def test_a_refused_call_is_ended_without_being_started():
    tracing = RecordingTracing()
    bridge = traced_bridge(tracing)
    call = RecordingWaiter()
    bridge.refused_call(call, Outcome.OFFLINE)
    assert tracing.told == [("ended", None, Outcome.OFFLINE)]


def test_without_a_tracer_the_agents_context_goes_as_sent_with_a_tracestate_escaped():
    bridge = traced_bridge(None)
    channel, link = connect(bridge)
    register(channel, tool("work"), trace=True)
    call = RecordingWaiter()
    call.traceparent, call.tracestate = PARENT.encode(), 'a=say "hi"'
    bridge.start_call(channel, channel.toolset.tools["work"], b'{"q":1}', call, NOW)
    assert link.messages()[-1] == {
        "type": "call",
        "id": call.id,
        "name": "work",
        "arguments": {"q": 1},
        "traceparent": PARENT,
        "tracestate": 'a=say "hi"',
    }


def test_an_app_that_did_not_ask_gets_the_v1_call():
    bridge = traced_bridge(RecordingTracing())
    channel, link = connect(bridge)
    register(channel, tool("work"))
    call = RecordingWaiter()
    call.traceparent = PARENT.encode()
    bridge.start_call(channel, channel.toolset.tools["work"], b"{}", call, NOW)
    assert set(json.loads(link.texts()[-1])) == {"type", "id", "name", "arguments"}
