"""The agent endpoint's token (ClientMCP v1 §4): remembering what a header carries changes nothing it answers."""

from __future__ import annotations

import json

import pytest
from fakes import (
    NOW,
    SECRET,
    RecordingEvents,
    RecordingExchange,
    connect,
    make_bridge,
    register,
    request_with_headers,
    tool,
)

from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.tokens import mint

LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


@pytest.fixture
def endpoint() -> AgentEndpoint:
    """An endpoint whose bridge has two apps online: alice declares `a`, bob declares `b`."""
    bridge = make_bridge()
    for client_id, name in (("alice", "a"), ("bob", "b")):
        channel, _ = connect(bridge, client_id)
        register(channel, tool(name))
    return AgentEndpoint(bridge, bridge.verifier, None)


def ask(endpoint: AgentEndpoint, authorization: bytes | None, path_token: bytes = b"", now: float = NOW):
    """tools/list with this Authorization header (and /mcp/<token>): (status, tool names or the error)."""
    headers = {b"content-type": b"application/json", b"accept": b"application/json"}
    if authorization is not None:
        headers[b"authorization"] = authorization
    exchange = RecordingExchange(request_with_headers(b"POST", b"/mcp", headers, (), LIST, True))
    endpoint.handle(exchange, path_token, now)
    status, body = exchange.answer
    answer = json.loads(body)
    if status == 200:
        return status, [t["name"] for t in answer["result"]["tools"]]
    return status, answer["error"]["message"]


def bearer(client_id: str, ttl: float = 3600) -> bytes:
    return b"Bearer " + mint(SECRET, "agent", client_id, ttl, NOW).encode()


def test_a_remembered_header_is_refused_once_its_token_expires(endpoint):
    header = bearer("alice", ttl=10)
    assert ask(endpoint, header) == (200, ["a"])
    assert ask(endpoint, header, now=NOW + 60) == (200, ["a"])  # within the clock skew
    assert ask(endpoint, header, now=NOW + 71) == (401, "Unauthorized: token expired")


def test_another_scheme_beside_a_path_token_is_never_taken_for_that_token(endpoint):
    """`Authorization: Basic ...` with /mcp/<token>: the path's token counts, each time its own."""
    alice = mint(SECRET, "agent", "alice", 3600, NOW).encode()
    bob = mint(SECRET, "agent", "bob", 3600, NOW).encode()
    assert ask(endpoint, b"Basic dXNlcjpwYXNz", alice) == (200, ["a"])
    assert ask(endpoint, b"Basic dXNlcjpwYXNz", bob) == (200, ["b"])


def test_a_refused_header_is_refused_every_time(endpoint):
    header = (
        b"Bearer " + mint(b"another-secret-that-is-long-enough-012345", "agent", "alice", 3600, NOW).encode()
    )
    for _ in range(2):
        assert ask(endpoint, header) == (401, "Unauthorized: token signature does not verify")


def test_the_tokens_read_from_headers_are_remembered_within_a_bound(endpoint):
    # Every agent chooses its own headers: a stream of distinct ones must not grow memory.
    alice = bearer("alice")
    assert ask(endpoint, alice) == (200, ["a"])
    for n in range(1_024):
        assert ask(endpoint, b"Basic %d" % n)[0] == 401
    assert len(endpoint._bearer_cache) == 1_024
    assert alice not in endpoint._bearer_cache  # the oldest went first
    assert ask(endpoint, alice) == (200, ["a"])  # and is read out again when it comes back
    # A value longer than 2 KiB is read every time, never kept.
    long_header = bearer("alice") + b" " * 2_100
    assert ask(endpoint, long_header) == (200, ["a"])
    assert ask(endpoint, long_header) == (200, ["a"])
    assert long_header not in endpoint._bearer_cache
    assert len(endpoint._bearer_cache) == 1_024


def test_a_bearer_header_without_a_token_is_no_token(endpoint):
    for header in (b"Bearer", b"Bearer   ", b"bearer "):
        assert ask(endpoint, header) == (
            401,
            "Unauthorized: no agent token: send Authorization: Bearer <token>",
        )
        assert ask(endpoint, header) == (
            401,
            "Unauthorized: no agent token: send Authorization: Bearer <token>",
        )


def test_the_accept_values_read_are_remembered_within_a_bound(endpoint):
    # Accept is the agent's to choose too: past 256 distinct values, each is parsed every time.
    alice = bearer("alice")
    for n in range(300):
        headers = {b"content-type": b"application/json", b"accept": b"application/json, x/%d" % n}
        headers[b"authorization"] = alice
        exchange = RecordingExchange(request_with_headers(b"POST", b"/mcp", headers, (), LIST, True))
        endpoint.handle(exchange, b"", NOW)
        assert exchange.answer[0] == 200
    assert len(endpoint._accept_cache) == 256


def test_each_401_is_told_to_the_event_log_with_what_is_wrong(endpoint):
    events = endpoint.bridge.events = RecordingEvents()
    assert ask(endpoint, None)[0] == 401
    assert ask(endpoint, bearer("alice", ttl=10), now=NOW + 71)[0] == 401
    assert ask(endpoint, bearer("alice"))[0] == 200
    assert events.told == [
        ("agent_unauthorized", "no agent token: send Authorization: Bearer <token>"),
        ("agent_unauthorized", "token expired"),
    ]


def test_a_legacy_session_id_is_the_one_the_bridge_is_given(endpoint):
    """The core reads no random source: the I/O side's `new_session_id` makes each legacy session's id."""
    made = iter([b"first-session", b"second-session"])
    endpoint.bridge.new_session_id = made.__next__
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    headers = {b"content-type": b"application/json", b"accept": b"application/json"}
    sessions = []
    for _ in range(2):
        exchange = SessionExchange(request_with_headers(b"POST", b"/mcp", headers, (), body, True))
        endpoint.handle(exchange, mint(SECRET, "agent", "alice", 3600, NOW).encode(), NOW)
        assert exchange.answer[0] == 200
        sessions.append(exchange.headers[b"mcp-session-id"])
    assert sessions == [b"first-session", b"second-session"]


class SessionExchange(RecordingExchange):
    """Keeps the answer's headers too."""

    __slots__ = ("headers",)

    def respond(self, status: int, headers, body: bytes) -> None:
        self.headers = dict(headers)
        super().respond(status, headers, body)
