"""The client channel via a recording link (ClientMCP v1 §3, docs/protocol.md): masked frames in, exact bytes out."""

from __future__ import annotations

import json

import pytest
from fakes import (
    NOW,
    RecordingEvents,
    RecordingLink,
    RecordingWaiter,
    client_text,
    connect,
    is_open,
    make_bridge,
    register,
    send,
    token,
    tool,
)
from wire import Op, client_frame

from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.limits import MAX_CLOSE_REASON_BYTES
from clientmcp_fast.core.messages import decode_app_message
from clientmcp_fast.core.register import RegisterError, parse_register
from clientmcp_fast.core.tokens import mint

REGISTERED_FRAME = b'\x81\x15{"type":"registered"}'
PONG_FRAME = b'\x81\x0f{"type":"pong"}'


def assert_closed(link: RecordingLink, code: int, reason: str) -> None:
    """The channel wrote exactly one close frame, last, with this code and reason, and ended the link."""
    assert link.close() == (code, reason)
    assert link.frames()[-1][0] == Op.CLOSE
    assert link.ends == [True]


# -- ClientMCP v1 §3.1: connecting, and the token as a close code -----------------------------


def test_a_valid_client_token_attaches_the_app_silently():
    bridge = make_bridge()
    channel, link = connect(bridge, "alice-wallet")
    assert channel.client_id == "alice-wallet"
    assert bridge.apps == {"alice-wallet": channel}
    assert is_open(channel)
    assert link.data == b""
    assert link.ends == []


def test_no_token_closes_with_4401_right_after_open():
    bridge = make_bridge()
    channel, link = connect(bridge, None, offered=None)
    assert link.frames() == [(Op.CLOSE, b"\x11\x31no token offered: send it as the second subprotocol")]
    assert link.ends == [True]
    assert bridge.apps == {}
    assert not is_open(channel)


@pytest.mark.parametrize(
    ("offered", "reason"),
    [
        ("not-a-jwt", "token is malformed"),
        (
            mint(b"some-other-secret-0123456789abcdef-xyz", "client", "alice", 60, NOW),
            "token signature does not verify",
        ),
        (token("alice", ttl=-61), "token expired"),
        (token("alice", role="agent"), "token role is agent, this endpoint needs client"),
    ],
    ids=["garbage", "wrong-secret", "expired", "agent-role"],
)
def test_a_bad_token_closes_with_4401_naming_the_problem(offered, reason):
    bridge = make_bridge()
    channel, link = connect(bridge, None, offered=offered)
    assert_closed(link, 4401, reason)
    assert len(link.frames()) == 1
    assert bridge.apps == {}
    assert channel.client_id is None


def test_messages_after_a_4401_are_ignored():
    bridge = make_bridge()
    channel, link = connect(bridge, None, offered="not-a-jwt")
    register(channel, tool("t"))
    send(channel, {"type": "ping"})
    assert [opcode for opcode, _ in link.frames()] == [Op.CLOSE]


def test_the_token_is_checked_at_the_time_of_connecting():
    bridge = make_bridge()
    offered = token("alice", ttl=10)
    _, early = connect(bridge, None, offered=offered, now=NOW + 70)
    assert early.data == b""
    _, late = connect(bridge, None, offered=offered, now=NOW + 71)
    assert_closed(late, 4401, "token expired")


def test_an_established_connection_outlives_its_token():
    bridge = make_bridge(app_idle_timeout=10_000)
    channel, link = connect(bridge, None, offered=token("alice", ttl=10))
    register(channel, tool("t"), now=NOW + 3600)
    assert link.texts() == [b'{"type":"registered"}']
    assert is_open(channel)


def test_the_event_log_hears_of_connects_refusals_and_closes():
    events = RecordingEvents()
    bridge = make_bridge(events=events)
    alice, _ = connect(bridge, "alice")
    register(alice, tool("a b"))  # refused: its close follows
    connect(bridge, None, offered="not-a-jwt")
    connect(bridge, None, offered=None)  # no token at all: refused before any is read
    bob, _ = connect(bridge, "bob")
    bob.close(1000, "bye", NOW)
    assert events.told == [
        ("app_connected", "alice"),
        ("register_refused", "alice", 'tools[0] "a b": name has invalid characters'),
        ("app_closed", "alice", 4400, 'tools[0] "a b": name has invalid characters'),
        ("app_refused", "token is malformed"),
        ("app_connected", "bob"),
        ("app_closed", "bob", 1000, "bye"),
    ]


def test_app_connections_over_the_limit_get_4429_at_open():
    bridge = make_bridge(max_app_connections=2)
    connect(bridge, "a")
    connect(bridge, "b")
    _, third_link = connect(bridge, "c")
    assert_closed(third_link, 4429, "too many app connections on this bridge")
    assert set(bridge.apps) == {"a", "b"}


def test_connection_lost_counts_every_transport_down_to_zero():
    bridge = make_bridge(max_app_connections=1)
    first, _ = connect(bridge, "a")
    second, second_link = connect(bridge, "b")
    assert second_link.close()[0] == 4429
    first.connection_lost(NOW)
    second.connection_lost(NOW)
    assert bridge.app_connections == 0
    _, link = connect(bridge, "c")
    assert link.data == b""
    assert set(bridge.apps) == {"c"}


def test_a_bridge_shutting_down_closes_new_apps_with_1001():
    bridge = make_bridge()
    bridge.shutdown(NOW)
    _, link = connect(bridge, "alice")
    assert_closed(link, 1001, "bridge shutting down")
    assert bridge.apps == {}


# -- ClientMCP v1 §3.2: register and registered -----------------------------------------------


def test_an_accepted_register_is_answered_with_exactly_registered():
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("a"), tool("b"))
    assert bytes(link.data) == REGISTERED_FRAME
    assert list(channel.toolset.tools) == ["a", "b"]


def test_every_register_gets_its_own_registered_in_order():
    bridge = make_bridge()
    channel, link = connect(bridge)
    data = b"".join(
        client_text({"type": "register", "tools": [tool(name)]}) for name in ("one", "two", "three")
    )
    channel.receive_data(data, NOW)
    assert link.texts() == [b'{"type":"registered"}'] * 3
    assert list(channel.toolset.tools) == ["three"]


def test_registered_and_pongs_keep_the_order_of_the_messages():
    bridge = make_bridge()
    channel, link = connect(bridge)
    data = (
        client_text({"type": "register", "tools": []})
        + client_text(b'{"type":"ping"}')
        + client_text({"type": "register", "tools": [tool("x")]})
        + client_text({"type": "ping", "n": 2})
    )
    channel.receive_data(data, NOW)
    assert bytes(link.data) == REGISTERED_FRAME + PONG_FRAME + REGISTERED_FRAME + PONG_FRAME


def test_a_register_split_over_many_reads_is_answered_once():
    bridge = make_bridge()
    channel, link = connect(bridge)
    frame = client_text({"type": "register", "tools": [tool("split")]})
    for i in range(len(frame)):
        channel.receive_data(frame[i : i + 1], NOW)
    assert bytes(link.data) == REGISTERED_FRAME


def test_instructions_are_kept_and_absent_ones_clear_them():
    bridge = make_bridge()
    channel, _ = connect(bridge)
    register(channel, tool("t"), instructions="Use ETH.")
    assert channel.toolset.instructions == "Use ETH."
    register(channel, tool("t"))
    assert channel.toolset.instructions is None


def register_reason(message: dict) -> str:
    decoded = decode_app_message(json.dumps(message).encode())
    with pytest.raises(RegisterError) as caught:
        parse_register(decoded.tools, decoded.instructions, 1000)
    return str(caught.value)


@pytest.mark.parametrize(
    "message",
    [
        {"type": "register"},
        {"type": "register", "tools": {}},
        {"type": "register", "tools": [tool("a"), tool("b"), tool("c"), tool("a b")]},
        {"type": "register", "tools": [tool("x"), tool("x")]},
        {"type": "register", "tools": [{"name": "t"}]},
        {"type": "register", "tools": [tool("t")], "instructions": None},
        {"type": "register", "tools": [tool("世" * 128)]},
        {
            "type": "register",
            "tools": [
                {
                    "name": "n" * 128,
                    "inputSchema": {
                        "type": "object",
                        "properties": {"é" * 100: {"type": "number", "x-mcp-header": "Amount"}},
                    },
                }
            ],
        },
    ],
    ids=[
        "no-tools",
        "tools-object",
        "spec-example",
        "twice",
        "no-schema",
        "null-instructions",
        "cjk-name",
        "long-header-path",
    ],
)
def test_a_refused_register_closes_4400_with_the_whole_reason(message):
    expected = register_reason(message)
    assert len(expected.encode("utf-8")) <= MAX_CLOSE_REASON_BYTES
    bridge = make_bridge()
    channel, link = connect(bridge)
    send(channel, message)
    assert_closed(link, 4400, expected)
    assert Op.TEXT not in [opcode for opcode, _ in link.frames()]


def test_the_spec_example_reason_on_the_wire():
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("a"), tool("b"), tool("c"), tool("a b"))
    assert_closed(link, 4400, 'tools[3] "a b": name has invalid characters')


def test_too_many_tools_close_4400():
    bridge = make_bridge(max_tools=2)
    channel, link = connect(bridge)
    register(channel, tool("a"), tool("b"), tool("c"))
    assert_closed(link, 4400, "register: 3 tools, over the limit of 2")


def test_a_refused_register_keeps_nothing_of_it():
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("good"))
    register(channel, tool("bad name"))
    assert list(channel.toolset.tools) == ["good"]
    assert link.texts() == [b'{"type":"registered"}']
    assert link.close()[0] == 4400


# -- ClientMCP v1 §3.2 and docs/protocol.md: ping and pong ------------------------------------


def test_the_exact_ping_gets_the_exact_pong_bytes():
    bridge = make_bridge()
    channel, link = connect(bridge)
    channel.receive_data(client_text(b'{"type":"ping"}'), NOW)
    assert bytes(link.data) == PONG_FRAME


@pytest.mark.parametrize(
    "ping",
    [
        b'{"type":"ping","x":1}',
        b'{ "type" : "ping" }',
        b'{"x":[1,2],"type":"ping"}',
        b'{"type":"p\\u0069ng"}',
    ],
)
def test_any_ping_object_gets_the_same_pong(ping):
    bridge = make_bridge()
    channel, link = connect(bridge)
    channel.receive_data(client_text(ping), NOW)
    assert bytes(link.data) == PONG_FRAME


def test_many_pings_in_one_read_get_as_many_pongs():
    bridge = make_bridge()
    channel, link = connect(bridge)
    channel.receive_data(client_text(b'{"type":"ping"}') * 5, NOW)
    assert bytes(link.data) == PONG_FRAME * 5


@pytest.mark.parametrize("ping", [b'{"type":"ping"}', b'{"type":"ping","x":1}'])
def test_pings_refresh_last_seen(ping):
    bridge = make_bridge()
    channel, _ = connect(bridge)
    assert channel.last_seen == NOW
    channel.receive_data(client_text(ping), NOW + 50)
    assert channel.last_seen == NOW + 50


def test_nothing_is_answered_once_the_channel_closed():
    bridge = make_bridge()
    channel, link = connect(bridge)
    channel.close(1000, "bye", NOW)
    channel.receive_data(client_text(b'{"type":"ping"}'), NOW)
    register(channel, tool("t"))
    assert [opcode for opcode, _ in link.frames()] == [Op.CLOSE]


# -- ClientMCP v1 §3.2: forward compatibility and protocol errors (4400) ----------------------


@pytest.mark.parametrize(
    "message",
    [{"type": "hello"}, {"type": "progress", "id": "1", "value": 0.5}, {"type": ""}, {"type": "PING"}],
)
def test_unknown_types_are_ignored(message):
    bridge = make_bridge()
    channel, link = connect(bridge)
    send(channel, message)
    assert link.data == b""
    assert is_open(channel)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "message is not valid JSON"),
        (b'{"type":"ping"', "message is not valid JSON"),
        (b"", "message is not valid JSON"),
        (b"[1]", "message is not a JSON object"),
        (b'"register"', "message is not a JSON object"),
        (b"5", "message is not a JSON object"),
        (b"null", "message is not a JSON object"),
        (b"{}", "message has no type"),
        (b'{"id":"1"}', "message has no type"),
        (b'{"type":5}', "message type must be a string"),
        (b'{"type":null}', "message type must be a string"),
        (b'{"type":{"name":"ping"}}', "message type must be a string"),
        (b'{"type":["ping"]}', "message type must be a string"),
    ],
)
def test_malformed_messages_close_4400(payload, reason):
    bridge = make_bridge()
    channel, link = connect(bridge)
    channel.receive_data(client_text(payload), NOW)
    assert_closed(link, 4400, reason)


@pytest.mark.parametrize("kind", ["registered", "call", "cancel", "pong", "authorize"])
def test_bridge_to_client_types_sent_by_an_app_close_4400(kind):
    bridge = make_bridge()
    channel, link = connect(bridge)
    send(channel, {"type": kind, "id": "1"})
    assert_closed(link, 4400, f"{kind} is sent by the bridge, never by an app")


@pytest.mark.parametrize("payload", [b"", b"\x00\x01", b'{"type":"ping"}'])
def test_a_binary_message_closes_4400(payload):
    bridge = make_bridge()
    channel, link = connect(bridge)
    channel.receive_data(client_frame(Op.BINARY, payload), NOW)
    assert_closed(link, 4400, "binary messages are not part of the protocol: send JSON text")


def test_deeply_nested_json_closes_4400_instead_of_raising():
    """msgspec raises RecursionError on deep nesting: an app's message must never raise out of the core."""
    bridge = make_bridge()
    channel, link = connect(bridge)
    depth = 100_000
    payload = b'{"type":"hello","x":' + b"[" * depth + b"]" * depth + b"}"
    channel.receive_data(client_text(payload), NOW)
    assert_closed(link, 4400, "message nests too deeply")


def test_a_deeply_nested_input_schema_closes_4400_instead_of_raising():
    bridge = make_bridge()
    channel, link = connect(bridge)
    depth = 5000
    schema = b'{"type":"object","properties":{"p":' * depth + b'{"type":"string"}' + b"}}" * depth
    channel.receive_data(
        client_text(b'{"type":"register","tools":[{"name":"t","inputSchema":' + schema + b"}]}"), NOW
    )
    assert_closed(link, 4400, "message nests too deeply")


# -- ClientMCP v1 §3.2: results ---------------------------------------------------------------


def connected_with_call(wants_stream: bool = False):
    """An app with one tool and one call in flight to it."""
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("echo"))
    waiter = RecordingWaiter(wants_stream)
    assert bridge.start_call(channel, channel.toolset.tools["echo"], b"{}", waiter, NOW)
    link.new_frames()
    return bridge, channel, link, waiter, waiter


def test_a_result_reaches_the_waiter_as_the_app_sent_it():
    bridge, channel, link, waiter, call = connected_with_call()
    result = b'{ "content" : [ {"type":"text","text":"100.50"} ],\n "isError": false, "x": {"y": [1, 2.0]} }'
    channel.receive_data(
        client_text(b'{"type":"result","id":"' + call.id.encode() + b'","result":' + result + b"}"), NOW
    )
    assert waiter.events == [("result", result, False)]
    assert channel.calls == {}
    assert len(bridge.calls) == 0
    assert link.new_frames() == []


def test_a_result_with_result_type_says_so():
    _, channel, _, waiter, call = connected_with_call()
    send(channel, {"type": "result", "id": call.id, "result": {"content": [], "resultType": "complete"}})
    assert waiter.events == [("result", b'{"content":[],"resultType":"complete"}', True)]


@pytest.mark.parametrize("call_id", [5, None, ["1"], {"id": "1"}, True])
def test_a_result_with_a_non_string_id_closes_4400(call_id):
    _, channel, link, waiter, _ = connected_with_call()
    send(channel, {"type": "result", "id": call_id, "result": {"content": []}})
    assert_closed(link, 4400, "result: id must be the call's id, a string")
    assert waiter.events == [("error", "The application disconnected before answering.")]


def test_a_result_without_an_id_closes_4400():
    _, channel, link, _, _ = connected_with_call()
    send(channel, {"type": "result", "result": {"content": []}})
    assert_closed(link, 4400, "result: id must be the call's id, a string")


def test_a_result_without_result_closes_4400():
    _, channel, link, _, call = connected_with_call()
    send(channel, {"type": "result", "id": call.id})
    assert_closed(link, 4400, "result: result is missing")


@pytest.mark.parametrize(
    "result",
    [
        None,
        "done",
        5,
        [{"type": "text", "text": "x"}],
        {},
        {"isError": True},
        {"content": None},
        {"content": {"type": "text", "text": "x"}},
        {"content": "x"},
        {"content": 0},
    ],
    ids=[
        "null",
        "string",
        "number",
        "array",
        "empty",
        "no-content",
        "content-null",
        "content-object",
        "content-string",
        "content-number",
    ],
)
def test_a_result_without_a_content_array_closes_4400(result):
    _, channel, link, waiter, call = connected_with_call()
    send(channel, {"type": "result", "id": call.id, "result": result})
    assert_closed(link, 4400, "result: result must be an object with a content array")
    # The call fails as the connection ends; the bad result never reaches the agent.
    assert waiter.events == [("error", "The application disconnected before answering.")]


@pytest.mark.parametrize(
    ("result", "has_result_type"),
    [
        (b'{ "content" : [ ] }', False),
        (b'{"content":[],"resultType":"complete"}', True),
        (b'{"resultType":null,"content":[{"type":"text","text":"\\"content\\": {}"}]}', True),
        (b'{"content":{},"content":[1]}', False),  # the last member of a name counts
        (b'{"\\u0063ontent":[],"x":{"resultType":1}}', False),  # an escaped name; nested members do not count
    ],
)
def test_a_result_is_forwarded_as_sent_with_what_its_shape_says(result, has_result_type):
    _, channel, link, waiter, call = connected_with_call()
    send(channel, b'{"type":"result","id":"' + call.id.encode() + b'","result":' + result + b"}")
    assert waiter.events == [("result", result, has_result_type)]
    assert is_open(channel)


def test_a_result_for_an_unknown_id_is_ignored():
    _, channel, link, waiter, call = connected_with_call()
    send(channel, {"type": "result", "id": "no-such-call", "result": {"content": []}})
    assert link.new_frames() == []
    assert is_open(channel)
    assert waiter.events == []
    assert call.id in channel.calls


def test_a_second_result_for_the_same_id_is_ignored():
    _, channel, link, waiter, call = connected_with_call()
    send(channel, {"type": "result", "id": call.id, "result": {"content": [{"type": "text", "text": "1"}]}})
    send(channel, {"type": "result", "id": call.id, "result": {"content": [{"type": "text", "text": "2"}]}})
    assert waiter.events == [("result", b'{"content":[{"type":"text","text":"1"}]}', False)]
    assert is_open(channel)
    assert link.new_frames() == []


# -- ClientMCP v1 §3.3 and docs/configuration.md, Settings: congestion ------------------------


def test_overflowed_closes_4429():
    _, channel, link, waiter, _ = connected_with_call()
    channel.overflowed(NOW)
    assert_closed(link, 4429, "the app does not read: unsent data passed the hard limit")
    assert waiter.events == [("error", "The application disconnected before answering.")]


def test_congested_keeps_the_first_time_and_drained_clears_it():
    bridge = make_bridge()
    channel, _ = connect(bridge)
    channel.congested(NOW + 1)
    channel.congested(NOW + 5)
    assert channel.congested_since == NOW + 1
    channel.drained()
    assert channel.congested_since is None


def test_a_channel_is_created_counting_its_connection():
    bridge = make_bridge()
    AppChannel(bridge, RecordingLink(), NOW)
    assert bridge.app_connections == 1


# -- consent (docs/oauth.md, docs/protocol.md): authorize to the app, consent back ---------------


class AnyRequest:
    """Stands in for an authorization request: what ConsentRequests reads of it."""

    def __init__(self, request_id: str, app_id: str = "alice-wallet") -> None:
        self.id = request_id
        self.app_id = app_id


def test_an_app_that_registered_consent_is_sent_authorize():
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("t"), consent=True)
    assert channel.toolset.consent is True
    link.new_frames()
    assert channel.ask_consent("req-1", "Claude", "https://claude.ai", "ABCD2345") is None
    [(opcode, payload)] = link.new_frames()
    assert opcode == Op.TEXT and json.loads(payload) == {
        "type": "authorize",
        "id": "req-1",
        "client": {"name": "Claude", "uri": "https://claude.ai"},
        "code": "ABCD2345",
    }
    channel.ask_consent("req-2", None, "cursor:", "ABCD2345")
    assert json.loads(link.new_frames()[0][1])["client"] == {"uri": "cursor:"}


@pytest.mark.parametrize("members", [{}, {"consent": False}], ids=["v1 register", "consent false"])
def test_an_app_without_consent_is_never_sent_authorize(members):
    bridge = make_bridge()
    channel, link = connect(bridge)
    assert channel.ask_consent("req-1", "Claude", "https://claude.ai", "ABCD2345") == (
        "the app does not ask its user for consent (it did not register with consent: true)"
    )  # not registered at all
    register(channel, tool("t"), **members)
    link.new_frames()
    assert channel.ask_consent("req-1", "Claude", "https://claude.ai", "ABCD2345") is not None
    assert link.new_frames() == []


def test_a_consent_reaches_its_request_and_an_unknown_id_is_ignored():
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("t"), consent=True)
    consent = bridge.consents.open(AnyRequest("req-1"), channel, "ABCD2345", NOW)
    send(channel, {"type": "consent", "id": "other", "allow": True})
    assert consent.allow is None and is_open(channel)
    send(channel, {"type": "consent", "id": "req-1", "allow": False})
    assert consent.allow is False
    send(channel, {"type": "consent", "id": "req-1", "allow": True})  # a second answer changes nothing
    assert consent.allow is False and is_open(channel)
    assert bridge.consents.answers == {"allow": 0, "deny": 1}


def test_a_consent_from_another_connection_is_ignored():
    bridge = make_bridge()
    asked, _ = connect(bridge, "alice-wallet")
    register(asked, tool("t"), consent=True)
    other, _ = connect(bridge, "bob-wallet")
    consent = bridge.consents.open(AnyRequest("req-1"), asked, "ABCD2345", NOW)
    send(other, {"type": "consent", "id": "req-1", "allow": True})
    assert consent.allow is None


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"type": "consent", "allow": True}, "consent: id must be the authorize message's id, a string"),
        (
            {"type": "consent", "id": 7, "allow": True},
            "consent: id must be the authorize message's id, a string",
        ),
        ({"type": "consent", "id": "req-1"}, "consent: allow must be true or false"),
        ({"type": "consent", "id": "req-1", "allow": "yes"}, "consent: allow must be true or false"),
        ({"type": "consent", "id": "req-1", "allow": 1}, "consent: allow must be true or false"),
        ({"type": "consent", "id": "req-1", "allow": None}, "consent: allow must be true or false"),
    ],
    ids=["no id", "number id", "no allow", "string allow", "number allow", "null allow"],
)
def test_a_malformed_consent_closes_4400(message, reason):
    bridge = make_bridge()
    channel, link = connect(bridge)
    send(channel, message)
    assert_closed(link, 4400, reason)


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_a_register_with_consent_not_a_boolean_closes_4400(value):
    bridge = make_bridge()
    channel, link = connect(bridge)
    register(channel, tool("t"), consent=value)
    assert_closed(link, 4400, "register: consent must be true or false")
