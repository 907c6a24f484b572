"""Scoped agent tokens and per-token limits (docs/protocol.md, Scoped agent tokens).

Driven through the agent endpoint with bytes in and answers out, as an agent sees them.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from fakes import (
    NOW,
    SECRET,
    RecordingEvents,
    connect,
    make_bridge,
    register,
    request_with_headers,
    send,
    tool,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.counters import REFUSALS
from clientmcp_fast.core.http import Exchange
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.register import MAX_SCOPED_VIEWS, scoped_tools_json
from clientmcp_fast.core.tokens import MAX_SCOPE_ENTRIES, TokenError, TokenVerifier, _base64url, mint

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


class HeadersExchange(Exchange):
    """The Exchange port, keeping every answer with its headers."""

    __slots__ = ("answers",)

    def __init__(self, request) -> None:
        self.request = request
        self.on_abandon = None
        self.answers: list[tuple[int, dict[bytes, bytes], bytes]] = []

    def respond(self, status: int, headers, body: bytes) -> None:
        self.on_abandon = None
        self.answers.append((status, dict(headers), bytes(body)))

    def start_stream(self, headers) -> None:
        raise AssertionError("these requests accept JSON only")

    def hang_up(self, now: float = NOW) -> None:
        abandon, self.on_abandon = self.on_abandon, None
        if abandon is not None:
            abandon(now)


def agent_token(client_id: str = "app-1", tools=None, ttl: float = 3600) -> str:
    """An agent token of the core tests' secret, scoped to `tools` unless None (a new ttl makes a new token)."""
    return mint(SECRET, "agent", client_id, ttl, NOW, tools=tools)


def raw_token(claims: dict) -> str:
    """A token signed with the tests' secret whose claims are exactly `claims`."""
    signed = _base64url(b'{"alg":"HS256","typ":"JWT"}') + b"." + _base64url(json.dumps(claims).encode())
    return (signed + b"." + _base64url(hmac.new(SECRET, signed, hashlib.sha256).digest())).decode()


def post(endpoint: AgentEndpoint, token: str, body: dict, *, modern: bool = False, now: float = NOW):
    """One POST to /mcp: the exchange, answered or waiting on the app."""
    headers = {
        b"content-type": b"application/json",
        b"accept": b"application/json",
        b"authorization": b"Bearer " + token.encode(),
    }
    if modern:
        headers[b"mcp-protocol-version"] = MODERN.encode()
        headers[b"mcp-method"] = body["method"].encode()
        if body["method"] == "tools/call":
            headers[b"mcp-name"] = body["params"]["name"].encode()
        body = {**body, "params": {**body.get("params", {}), "_meta": META}}
    else:
        headers[b"mcp-protocol-version"] = b"2025-11-25"
    exchange = HeadersExchange(
        request_with_headers(b"POST", b"/mcp", headers, (), json.dumps(body).encode(), True)
    )
    endpoint.handle(exchange, b"", now)
    return exchange


def listed(endpoint: AgentEndpoint, token: str, *, modern: bool = False) -> tuple[int, list[str] | str]:
    """tools/list: (status, the names shown) or (status, the error's message)."""
    exchange = post(endpoint, token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, modern=modern)
    status, _, body = exchange.answers[0]
    answer = json.loads(body)
    if "error" in answer:
        return status, answer["error"]["message"]
    return status, [t["name"] for t in answer["result"]["tools"]]


def call(
    endpoint: AgentEndpoint, token: str, name: str, *, modern: bool = False, id: int = 7, now: float = NOW
):
    body = {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    return post(endpoint, token, body, modern=modern, now=now)


def online(*names: str, client_id: str = "app-1", **limits):
    """An endpoint whose bridge has one app online declaring `names`; (endpoint, channel, link)."""
    bridge = make_bridge(**limits)
    channel, link = connect(bridge, client_id)
    register(channel, *(tool(name) for name in names))
    return AgentEndpoint(bridge, bridge.verifier, None), channel, link


def call_ids(link) -> list[str]:
    return [message["id"] for message in link.messages() if message.get("type") == "call"]


def result(channel, call_id: str, now: float = NOW) -> None:
    send(channel, {"type": "result", "id": call_id, "result": {"content": []}}, now)


# -- the claim -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tools",
    [
        "a",  # a string
        5,  # a number
        {"a": True},  # an object
        [],  # an empty array
        [""],  # an empty name
        ["a"] * (MAX_SCOPE_ENTRIES + 1),  # 1,001 entries
        ["a", 5],  # a non-string element
        ["a", None],
        ["a", ["b"]],
        None,  # null
        True,
        ["a b"],  # not a tool name
        ["a*b"],  # a star inside
        ["read_**"],
        ["x" * 129],  # longer than a tool name
    ],
    ids=repr,
)
def test_a_malformed_tools_claim_is_401_and_grants_nothing(tools):
    """never read as "all tools"; the endpoint answers 401 to tools/list and tools/call."""
    endpoint, _, link = online("a", "b")
    token = raw_token({"sub": "app-1", "role": "agent", "exp": int(NOW + 3600), "tools": tools})
    with pytest.raises(TokenError, match="tools claim"):
        TokenVerifier([SECRET]).verify(token, "agent", NOW)
    status, message = listed(endpoint, token)
    assert status == 401 and message.startswith("Unauthorized: token tools claim")
    exchange = call(endpoint, token, "a")
    assert exchange.answers[0][0] == 401
    assert call_ids(link) == []


def test_a_claim_of_exactly_1000_entries_is_taken():
    endpoint, _, _ = online("a", "b")
    assert listed(endpoint, raw_token({"sub": "app-1", "role": "agent", "tools": ["b"] * 1000})) == (
        200,
        ["b"],
    )


def test_a_client_token_with_a_tools_claim_is_an_app_token_as_before():
    """The claim scopes agents; ClientMCP v1 §2 ignores other claims, so an app's token still connects."""
    token = raw_token({"sub": "app-1", "role": "client", "tools": "not an array"})
    assert TokenVerifier([SECRET]).verify(token, "client", NOW) == "app-1"


def test_mint_writes_the_claim_only_for_an_agent_and_only_a_valid_one():
    assert listed(online("read_a", "b")[0], agent_token(tools=["read_*"])) == (200, ["read_a"])
    with pytest.raises(ValueError):
        mint(SECRET, "client", "app-1", 60, NOW, tools=["a"])
    with pytest.raises(ValueError):
        mint(SECRET, "agent", "app-1", 60, NOW, tools=[])


# -- tools/list and tools/call in scope ------------------------------------------------------------

TWENTY = [f"tool_{n:02d}" for n in range(17)] + ["read_a", "read_b", "write_c"]


@pytest.mark.parametrize("modern", [False, True], ids=["legacy", "modern"])
def test_a_scoped_token_sees_and_calls_its_tools_only(modern):
    endpoint, channel, link = online(*TWENTY)
    token = agent_token(tools=["read_*", "write_c"])
    assert listed(endpoint, token, modern=modern) == (200, ["read_a", "read_b", "write_c"])
    for name in ("read_a", "read_b", "write_c"):
        exchange = call(endpoint, token, name, modern=modern)
        assert not exchange.answers  # sent to the app
        result(channel, call_ids(link)[-1])
        assert exchange.answers[0][0] == 200
    assert len(call_ids(link)) == 3


@pytest.mark.parametrize("modern", [False, True], ids=["legacy", "modern"])
def test_a_hidden_tool_is_answered_byte_for_byte_as_an_unknown_one(modern):
    """Same status, headers and body as a name the app never declared: nothing tells it exists."""
    endpoint, _, link = online(*TWENTY)
    token = agent_token(tools=["read_*"])
    hidden = call(endpoint, token, "tool_05", modern=modern).answers
    unknown = call(endpoint, token, "tool_99", modern=modern).answers
    assert hidden[0][0] == (400 if modern else 200)
    assert json.loads(unknown[0][2])["error"] == {"code": -32602, "message": "Unknown tool: tool_99"}
    assert hidden == [(s, h, b.replace(b"tool_99", b"tool_05")) for s, h, b in unknown]
    assert call_ids(link) == []
    counters = endpoint.bridge.counters
    assert counters.refusals[REFUSALS.index("scope")] == 1  # the hidden one only
    assert counters.calls_ended[Outcome.UNKNOWN_TOOL] == 2  # docs/operations.md: both, as unknown_tool


def test_an_unscoped_token_sees_every_tool_as_before():
    endpoint, _, _ = online(*TWENTY)
    assert listed(endpoint, agent_token()) == (200, TWENTY)


def test_a_star_alone_is_the_empty_prefix_and_matches_every_tool():
    """docs/protocol.md, Scoped agent tokens: `*` alone is a prefix like `read_*`, of nothing."""
    endpoint, _, _ = online(*TWENTY)
    assert listed(endpoint, agent_token(tools=["*"])) == (200, TWENTY)


def test_a_scoped_list_of_an_offline_app_is_empty_and_one_matching_nothing_too():
    endpoint, channel, _ = online("a")
    assert listed(endpoint, agent_token(tools=["zz*"])) == (200, [])
    channel.connection_lost(NOW)
    assert listed(endpoint, agent_token(tools=["a"])) == (200, [])


def test_a_scoped_list_follows_a_new_register():
    endpoint, channel, _ = online("read_a", "b")
    token = agent_token(tools=["read_*"])
    assert listed(endpoint, token) == (200, ["read_a"])
    register(channel, tool("b"), tool("read_z"), tool("read_a"))
    assert listed(endpoint, token) == (200, ["read_z", "read_a"])


def test_a_scoped_view_keeps_each_tool_s_bytes_as_the_app_sent_them():
    endpoint, channel, _ = online()
    register(channel, tool("a", title="A é", annotations={"readOnlyHint": True}), tool("b"))
    exchange = post(endpoint, agent_token(tools=["a"]), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    tools = json.loads(exchange.answers[0][2])["result"]["tools"]
    assert tools == [tool("a", title="A é", annotations={"readOnlyHint": True})]


def test_the_scoped_views_of_a_tool_set_are_bounded():
    endpoint, channel, _ = online("a", "b")
    toolset = endpoint.bridge.apps["app-1"].toolset
    verifier = TokenVerifier([SECRET])
    for n in range(MAX_SCOPED_VIEWS + 10):
        scope = verifier.grant(agent_token(tools=["a", f"x{n}"]), "agent", NOW).scope
        assert scoped_tools_json(toolset, scope) == json.dumps([tool("a")], separators=(",", ":")).encode()
    assert len(toolset.scoped) == MAX_SCOPED_VIEWS


NAMES = st.text("abr_.-1", min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(
    tools=st.lists(NAMES, min_size=0, max_size=12, unique=True),
    entries=st.lists(st.one_of(NAMES, NAMES.map(lambda n: n + "*"), st.just("*")), min_size=1, max_size=6),
    modern=st.booleans(),
)
def test_the_visible_set_is_exactly_the_matching_set(tools, entries, modern):
    """Random tool sets and scopes (names, prefixes, overlaps): shown and callable iff matched."""
    endpoint, channel, link = online(*tools)
    token = agent_token(tools=entries)

    def matches(name: str) -> bool:
        return any(name == e or (e.endswith("*") and name.startswith(e[:-1])) for e in entries)

    expected = [name for name in tools if matches(name)]
    assert listed(endpoint, token, modern=modern) == (200, expected)
    for name in tools:
        exchange = call(endpoint, token, name, modern=modern)
        if matches(name):
            assert not exchange.answers  # sent to the app
        else:
            assert json.loads(exchange.answers[0][2])["error"]["message"] == f"Unknown tool: {name}"
    assert len(call_ids(link)) == len(expected)


def test_list_changed_still_fires_for_a_scoped_agent():
    """The streams of a client ID hear every change, whatever the scope of the token that opened them."""
    from fakes import RecordingStream

    endpoint, channel, _ = online("read_a", "b")
    stream = RecordingStream()
    endpoint.bridge.add_stream("app-1", stream, NOW)
    register(channel, tool("read_a"), tool("read_b"))
    endpoint.bridge.on_timer(NOW)
    assert stream.events == ["tools_changed"]


# -- per-token limits ------------------------------------------------------------------------------


@pytest.mark.parametrize("modern", [False, True], ids=["legacy", "modern"])
def test_a_token_over_its_rate_gets_429_with_retry_after_and_another_token_is_served(modern):
    endpoint, channel, link = online("a", agent_rate=5.0, agent_max_calls=0)
    greedy, other = agent_token(ttl=3600), agent_token(ttl=3601)
    statuses = [call(endpoint, greedy, "a", id=n, modern=modern).answers for n in range(8)]
    # The bucket holds a second of requests: five served (sent to the app), three refused.
    assert [a[0][0] if a else "sent" for a in statuses] == ["sent"] * 5 + [429] * 3
    status, headers, body = statuses[5][0]
    assert headers[b"retry-after"] == b"1" and headers[b"content-type"] == b"application/json"
    error = json.loads(body)
    assert error["jsonrpc"] == "2.0" and error["id"] == 5 and error["error"]["code"] == -32600
    assert error["error"]["message"].startswith("Too many requests")
    answered = [call(endpoint, other, "a", id=100 + n, modern=modern) for n in range(5)]
    assert all(not exchange.answers for exchange in answered)  # every one of them sent to the app
    assert len(call_ids(link)) == 10
    for call_id in call_ids(link)[5:]:
        result(channel, call_id)
    answers = [exchange.answers[0] for exchange in answered]
    assert [(status, json.loads(body)["id"]) for status, _, body in answers] == [
        (200, 100 + n) for n in range(5)
    ]
    assert all("result" in json.loads(body) for _, _, body in answers)
    assert endpoint.bridge.counters.refusals[REFUSALS.index("rate")] == 3


def test_the_bucket_refills_with_time():
    endpoint, _, _ = online("a", agent_rate=2.0)
    token = agent_token()
    assert [listed(endpoint, token)[0] for _ in range(3)] == [200, 200, 429]
    post_at = NOW + 0.5  # one request's worth back
    exchange = post(endpoint, token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, now=post_at)
    assert exchange.answers[0][0] == 200
    exchange = post(endpoint, token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, now=post_at)
    assert exchange.answers[0][0] == 429
    later = post(endpoint, token, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, now=post_at + 10)
    assert later.answers[0][0] == 200  # full again, not beyond: a second's worth
    burst = [
        post(endpoint, token, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, now=post_at + 10)
        for _ in range(2)
    ]
    assert [e.answers[0][0] for e in burst] == [200, 429]


# 0.001 is the smallest rate the settings take (clientmcp_fast/config.py, MIN_AGENT_RATE): its
# wait is the longest, and both twins say it alike.
@pytest.mark.parametrize(
    "rate, retry_after", [(0.5, b"2"), (0.4, b"3"), (0.3, b"4"), (0.1, b"10"), (3.0, b"1"), (0.001, b"1000")]
)
def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one(rate, retry_after):
    endpoint, _, _ = online("a", agent_rate=rate)
    token = agent_token()
    assert listed(endpoint, token)[0] == 200
    if rate >= 1:
        for _ in range(int(rate) - 1):
            listed(endpoint, token)
    refused = post(endpoint, token, {"jsonrpc": "2.0", "id": "x", "method": "tools/list"})
    status, headers, body = refused.answers[0]
    assert status == 429 and headers[b"retry-after"] == retry_after
    assert json.loads(body)["id"] == "x"


@pytest.mark.parametrize("modern", [False, True], ids=["legacy", "modern"])
def test_a_token_at_its_calls_in_flight_gets_429_and_others_do_not(modern):
    endpoint, channel, link = online("a", agent_max_calls=2, agent_rate=0)
    token, other = agent_token(ttl=3600), agent_token(ttl=3601)
    first = [call(endpoint, token, "a", id=n, modern=modern) for n in range(2)]
    refused = call(endpoint, token, "a", id=9, modern=modern).answers
    status, headers, body = refused[0]
    assert status == 429 and headers[b"retry-after"] == b"1"
    assert json.loads(body)["id"] == 9
    assert json.loads(body)["error"]["message"].startswith("Too many calls in flight")
    assert not call(endpoint, other, "a", modern=modern).answers  # another token: sent
    assert all(not exchange.answers for exchange in first)
    assert len(call_ids(link)) == 3
    assert endpoint.bridge.counters.refusals[REFUSALS.index("concurrency")] == 1
    assert sum(endpoint.bridge.counters.calls_ended) == 0  # docs/operations.md: not in clientmcp_calls_total


def test_a_batch_counts_once_against_the_rate_and_each_of_its_calls_against_the_calls_in_flight():
    """docs/configuration.md, Agent limits: a 2025-03-26 batch is one request; a call over, its error alone."""
    endpoint, channel, link = online("a", agent_rate=2.0, agent_max_calls=1)
    token = agent_token()
    headers = {
        b"content-type": b"application/json",
        b"accept": b"application/json",
        b"authorization": b"Bearer " + token.encode(),
    }
    elements = [
        {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "a", "arguments": {}}}
        for n in range(3)
    ]
    batch = HeadersExchange(
        request_with_headers(b"POST", b"/mcp", headers, (), json.dumps(elements).encode(), True)
    )
    endpoint.handle(batch, b"", NOW)
    assert not batch.answers  # waiting on its first call, the one the app got
    assert len(call_ids(link)) == 1
    result(channel, call_ids(link)[0])
    ((status, answer_headers, body),) = batch.answers
    assert status == 200 and b"retry-after" not in answer_headers
    answers = json.loads(body)
    assert [answer["id"] for answer in answers] == [0, 1, 2] and "result" in answers[0]
    for refused in answers[1:]:
        assert refused["error"]["code"] == -32600
        assert refused["error"]["message"].startswith("Too many calls in flight")
    assert endpoint.bridge.counters.refusals == [0, 0, 2]
    # The batch took one request of the bucket's two: one more is served, the next refused.
    assert [listed(endpoint, token)[0] for _ in range(2)] == [200, 429]


def _saturated():
    """A token at its one call in flight, and the endpoint."""
    endpoint, channel, link = online("a", agent_max_calls=1, agent_rate=0, call_timeout=5)
    token = agent_token()
    exchange = call(endpoint, token, "a")
    assert call(endpoint, token, "a").answers[0][0] == 429
    return endpoint, channel, link, token, exchange


def test_the_slot_frees_when_the_app_answers():
    endpoint, channel, link, token, _ = _saturated()
    result(channel, call_ids(link)[0])
    assert not call(endpoint, token, "a").answers


def test_the_slot_frees_when_the_agent_cancels():
    endpoint, channel, link, token, exchange = _saturated()
    exchange.hang_up()
    assert not call(endpoint, token, "a").answers


def test_the_slot_frees_when_the_agent_sends_notifications_cancelled():
    endpoint, channel, link, token, exchange = _saturated()
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    assert post(endpoint, token, cancel).answers[0][0] == 202
    assert json.loads(exchange.answers[0][2])["error"]["code"] == -32800  # the call's own answer
    assert [m["type"] for m in link.messages()][-1] == "cancel"
    assert not call(endpoint, token, "a").answers


def test_the_slot_frees_when_the_call_times_out():
    endpoint, channel, link, token, exchange = _saturated()
    send(channel, {"type": "ping"}, NOW + 5)
    endpoint.bridge.on_timer(NOW + 5)
    assert json.loads(exchange.answers[0][2])["result"]["isError"] is True
    assert not call(endpoint, token, "a", now=NOW + 5).answers


def test_the_slot_frees_when_the_app_is_lost():
    endpoint, channel, link, token, exchange = _saturated()
    channel.connection_lost(NOW)
    text = json.loads(exchange.answers[0][2])["result"]["content"][0]["text"]
    assert text == Outcome.DISCONNECTED.text
    channel2, _ = connect(endpoint.bridge, "app-1")
    register(channel2, tool("a"))
    assert not call(endpoint, token, "a").answers


def test_limits_at_zero_are_off():
    endpoint, _, link = online("a", agent_rate=0, agent_max_calls=0, max_calls_per_app=5_000)
    token = agent_token()
    for n in range(2_000):
        assert not call(endpoint, token, "a", id=n).answers
    assert len(call_ids(link)) == 2_000
    assert endpoint.bridge.counters.refusals == [0, 0, 0]


def test_the_default_limits_are_on():
    bridge = make_bridge()
    assert bridge.limits.agent_rate == 1_000 and bridge.max_calls_per_token == 100


def test_tokens_counted_are_the_verifier_s_bounded_cache_and_an_evicted_one_starts_afresh():
    """docs/limits.md: one grant per verified token, at most the cache's entries; the oldest goes first."""
    bridge = make_bridge(agent_rate=1.0)
    bridge.verifier._cache_size = 3
    endpoint = AgentEndpoint(bridge, bridge.verifier, None)
    tokens = [agent_token(ttl=3600 + n) for n in range(4)]
    assert listed(endpoint, tokens[0])[0] == 200
    assert listed(endpoint, tokens[0])[0] == 429
    for token in tokens[1:]:
        assert listed(endpoint, token)[0] == 200
    assert len(bridge.verifier._cache) == 3  # tokens[0] went first, and its bucket with it
    assert listed(endpoint, tokens[0])[0] == 200


def test_the_same_token_by_header_and_by_path_is_one_grant():
    """A token is its signature: sent either way it draws on one bucket."""
    endpoint, _, _ = online("a", agent_rate=1.0)
    token = agent_token()
    assert listed(endpoint, token)[0] == 200
    headers = {b"content-type": b"application/json", b"accept": b"application/json"}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    exchange = HeadersExchange(request_with_headers(b"POST", b"/mcp/x", headers, (), body, True))
    endpoint.handle(exchange, token.encode(), NOW)
    assert exchange.answers[0][0] == 429


def test_refusals_are_told_to_the_event_log_with_the_client_id():
    endpoint, _, _ = online("a", "b", agent_rate=1.0)
    events = endpoint.bridge.events = RecordingEvents()
    token = agent_token(tools=["a"])
    call(endpoint, token, "b")
    call(endpoint, token, "b", now=NOW + 0.5)
    told = [(REFUSALS[reason], client_id, now) for reason, client_id, now in events.named("agent_refused")]
    assert told == [("scope", "app-1", NOW), ("rate", "app-1", NOW + 0.5)]
