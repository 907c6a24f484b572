"""The agent endpoint (`core.agent.AgentEndpoint.handle`): any method, headers and body, in both MCP eras.

The input is a request written out as text:

    POST /mcp                  the method and the request target (/mcp or /mcp/<token>)
    Authorization: Bearer $alice
    Mcp-Method: tools/call     any headers, one a line (names lower-cased, repeats joined)
                               an empty line, then the body
    {"jsonrpc":"2.0",...}

`$alice`, `$bob` and `$carol` anywhere stand for valid agent tokens (alice's app is
online with tools `a` and `h`, the latter with `x-mcp-header` parameters; bob's app is
online without a register; carol has no app), and `$app` for a client token. The
harness's own `x-fuzz` header says what alice's app does with a call: answer it (the
default), `typed` (with a resultType), `bad` (a result of the wrong shape), `slow` (after
more than a second), `timeout`, `gone` (the app disconnects) or `hangup` (the agent
leaves first); `change` makes it register another tool set afterwards (a stream hears).

A failure is an exception out of `handle` or the bridge, a request answered other than
exactly once (respond, or start_stream and later end_stream; at most once after the agent
hung up), a status without a reason phrase in core/http.py, a header value with a line
break, or an answer that is not JSON-RPC in JSON (or SSE events of it).
"""

from __future__ import annotations

import orjson
from fakes import NOW, client_text, connect, is_open, make_bridge, register, token, tool

from clientmcp_fast import speedups
from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.http import KNOWN_INDEX, KNOWN_NAMES, REASONS, Exchange, Request

TOKENS = {
    b"$alice": token("alice", "agent").encode(),
    b"$bob": token("bob", "agent").encode(),
    b"$carol": token("carol", "agent").encode(),
    b"$app": token("alice").encode(),
}
HEADER_TOOL = tool(
    "h",
    inputSchema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        },
    },
)
# RFC 9110 §5.6.2 token characters: a field name the request reader can give.
_TCHAR = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")
# RFC 9110 §5.5: what a field value can hold (no CR, LF or NUL: the request reader never gives one).
_VALUE_DROPS = bytes(b for b in range(32) if b != 9) + b"\x7f"


def parse(data: bytes) -> tuple[bytes, bytes, Request]:
    """The request the input writes out: its target, its `x-fuzz` words, and the request."""
    for placeholder, value in TOKENS.items():
        data = data.replace(placeholder, value)
    head, _, body = data.partition(b"\n\n")
    first, *lines = head.split(b"\n")
    method, _, target = first.partition(b" ")
    known: list[bytes | None] = [None] * len(KNOWN_NAMES)
    others: dict[bytes, bytes] = {}
    values: dict[bytes, list[bytes]] = {}
    for line in lines:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name and all(c in _TCHAR for c in name):
            values.setdefault(name, []).append(value.translate(None, _VALUE_DROPS).strip(b" \t"))
    for name, found in values.items():
        value = b", ".join(found)
        index = KNOWN_INDEX.get(name)
        if index is None:
            others[name] = value
        else:
            known[index] = value
    repeated = frozenset(name for name, found in values.items() if len(found) > 1)
    request = Request(method, target.strip(), known, others or None, repeated, body, True)
    return target.strip(), others.get(b"x-fuzz", b""), request


class CheckingExchange(Exchange):
    """The Exchange port, checking each answer as it comes."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.on_abandon = None
        self.answers = 0
        self.ended = False
        self.streaming = False

    def _headers(self, headers) -> None:
        for name, value in headers:
            assert b"\r" not in value and b"\n" not in value and name == name.lower(), (name, value)

    def respond(self, status: int, headers, body: bytes) -> None:
        assert self.answers == 0, "answered twice"
        self.answers += 1
        assert status in REASONS and status >= 200, status
        self._headers(headers)
        kind = dict(headers).get(b"content-type")
        if kind == b"application/json":
            answer = orjson.loads(body)
            for message in answer if type(answer) is list else (answer,):
                assert message["jsonrpc"] == "2.0" and ("result" in message) != ("error" in message), body
        elif kind == b"text/event-stream":
            self._event(body)
        else:
            assert body == b"", (status, body)  # 202, 204, a refused preflight

    def _event(self, data: bytes) -> None:
        """One SSE event of one JSON-RPC message, or the keep-alive comment."""
        if data != b": keep-alive\n\n":
            assert data.startswith(b"event: message\ndata: ") and data.endswith(b"\n\n"), data
            json = data[len(b"event: message\ndata: ") : -2]
            assert b"\n" not in json and orjson.loads(json)["jsonrpc"] == "2.0", data

    def start_stream(self, headers) -> None:
        assert self.answers == 0, "answered twice"
        self.answers += 1
        self.streaming = True
        self._headers(headers)

    def stream(self, data: bytes) -> None:
        assert self.streaming and not self.ended, "a piece outside a stream"
        self._event(data)

    def end_stream(self) -> None:
        assert self.streaming and not self.ended, "a stream ended twice or never started"
        self.ended = True


def _answer(app, mode: bytes, now: float) -> None:
    """Alice's app answers every call it holds, as the `x-fuzz` words say."""
    for call_id in list(app.calls):
        if b"bad" in mode:
            result = {"content": "not an array"}
        elif b"typed" in mode:
            result = {"content": [], "resultType": "complete", "structuredContent": {"n": 1}}
        else:
            result = {"content": [{"type": "text", "text": "done\n"}]}
        app.receive_data(client_text({"type": "result", "id": call_id, "result": result}), now)


def TestOneInput(data: bytes) -> None:
    target, mode, request = parse(data)
    kind, path_token = speedups.route(target)
    if kind != speedups.ROUTE_MCP:
        return  # the net layer answers other paths itself
    bridge = make_bridge()
    alice, alice_link = connect(bridge, "alice")
    register(alice, tool("a"), HEADER_TOOL, instructions="alice's tools")
    connect(bridge, "bob")
    endpoint = AgentEndpoint(bridge, bridge.verifier, None)
    exchange = CheckingExchange(request)
    endpoint.handle(exchange, path_token, NOW)
    now = NOW
    if b"hangup" in mode and exchange.on_abandon is not None:
        exchange.on_abandon(NOW)
    elif b"gone" in mode:
        alice.connection_lost(NOW)
    elif b"timeout" in mode:
        bridge.on_timer(now := NOW + 1.5)  # a call switches to a stream if the agent takes one
        bridge.on_timer(now := NOW + bridge.limits.call_timeout + 1)
    else:
        if b"slow" in mode:
            bridge.on_timer(NOW + 1.5)
            bridge.on_timer(now := NOW + 2.5)
        _answer(alice, mode, now)
    if b"change" in mode and is_open(alice):
        register(alice, tool("b"), now=now)
    bridge.on_timer(now)  # the tool change is announced
    bridge.shutdown(NOW)  # every call still in flight fails, every stream ends
    if b"hangup" in mode:
        assert exchange.answers <= 1
    else:
        assert exchange.answers == 1, "never answered"
        assert exchange.ended or not exchange.streaming, "a stream never ended"
    for text in alice_link.texts():
        orjson.loads(text)  # the app is sent JSON only (calls, cancels, its registered)
