"""Micro benchmarks of the hot path (pytest-benchmark): `.venv/bin/python -m pytest bench/micro -q`.

Not part of the default `pytest` run (testpaths is `tests`). Functions with a compiled
twin in `_speedups/` run once per implementation, ids `pure` and `compiled`; the core
objects (AgentEndpoint, AppChannel) run with whichever `clientmcp_fast.speedups` picked
(set CLIENTMCP_NO_EXTENSIONS=1 for the pure one), recorded in each result's extra_info.
The inputs are the frames and requests of the bench's load: an app's result, an exact
ping, a call to the app, a tools/call in each era.
"""

from __future__ import annotations

import time
from collections import deque

import msgspec
import pytest

from clientmcp_fast import speedups
from clientmcp_fast._pure import frames as pure_frames
from clientmcp_fast._pure import http_reader as pure_http_reader
from clientmcp_fast._pure import routing as pure_routing
from clientmcp_fast._pure import splice as pure_splice

# Imported directly: `make bench-micro` builds the extensions, and a missing build must fail, not skip.
from clientmcp_fast._speedups import frames as compiled_frames  # noqa: E402
from clientmcp_fast._speedups import http_reader as compiled_http_reader  # noqa: E402
from clientmcp_fast._speedups import routing as compiled_routing  # noqa: E402
from clientmcp_fast._speedups import splice as compiled_splice  # noqa: E402
from clientmcp_fast.core.agent import AgentEndpoint
from clientmcp_fast.core.bridge import Bridge
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.generations import Generations
from clientmcp_fast.core.http import Exchange, Request
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES, Limits
from clientmcp_fast.core.tokens import TokenVerifier, mint
from clientmcp_fast.core.websocket import Link
from clientmcp_fast.net.server import new_session_id
from tests.core.fakes import request_with_headers

FRAMES = [pytest.param(pure_frames, id="pure"), pytest.param(compiled_frames, id="compiled")]
ROUTING = [pytest.param(pure_routing, id="pure"), pytest.param(compiled_routing, id="compiled")]
SPLICES = [pytest.param(pure_splice, id="pure"), pytest.param(compiled_splice, id="compiled")]
HTTP_READERS = [
    pytest.param(pure_http_reader, id="pure"),
    pytest.param(compiled_http_reader, id="compiled"),
]

SECRET = b"bench-micro-secret-0123456789abcdef"
MASK = b"\x37\xfa\x21\x3d"
RESULT = b'{"type":"result","id":"%s","result":{"content":[{"type":"text","text":"hi"}]}}'
CALL_MESSAGE = b'{"type":"call","id":"12345","name":"echo","arguments":{"text":"hi"}}'
REGISTER = b'{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}'
LEGACY_BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'
)
MODERN_BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
)


def client_frame(payload: bytes) -> bytes:
    """A masked text frame, as an app sends it (payload under 126 bytes)."""
    return bytes((0x81, 0x80 | len(payload))) + MASK + bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))


# -- frames and routing, compiled and pure ----------------------------------------------


@pytest.mark.parametrize("frames", FRAMES)
def test_feed_result_frame(benchmark, frames):
    """FrameReader.feed on one app result frame."""
    reader = frames.FrameReader(4 * 2**20)
    frame = client_frame(RESULT % b"12345")
    assert benchmark(reader.feed, frame) == [(speedups.OP_TEXT, 1, RESULT % b"12345")]


@pytest.mark.parametrize("frames", FRAMES)
def test_feed_exact_ping(benchmark, frames):
    """FrameReader.feed on the exact `{"type":"ping"}` frame, the pong fast path."""
    reader = frames.FrameReader(4 * 2**20)
    assert benchmark(reader.feed, client_frame(b'{"type":"ping"}')) == [(speedups.OP_EXACT_PING, 1, b"")]


@pytest.mark.parametrize("frames", FRAMES)
def test_build_call_frame(benchmark, frames):
    """build_frame for a call to the app."""
    assert (
        benchmark(frames.build_frame, speedups.OP_TEXT, CALL_MESSAGE)
        == b"\x81" + bytes((len(CALL_MESSAGE),)) + CALL_MESSAGE
    )


@pytest.mark.parametrize("splice", SPLICES)
def test_splice_json_id(benchmark, splice):
    """json_id of a request's id, as msgspec hands it over."""
    raw = msgspec.json.decode(LEGACY_BODY, type=dict[str, msgspec.Raw])["id"]
    assert benchmark(splice.json_id, raw) == b"1"


@pytest.mark.parametrize("splice", SPLICES)
def test_splice_jsonrpc_result(benchmark, splice):
    """jsonrpc_result around an app's result."""
    result = msgspec.json.decode(RESULT % b"1", type=dict[str, msgspec.Raw])["result"]
    assert benchmark(splice.jsonrpc_result, b"1", result).startswith(b'{"jsonrpc":"2.0","id":1,"result":{')


@pytest.mark.parametrize("splice", SPLICES)
def test_splice_complete_result(benchmark, splice):
    """complete_result around an app's result (2026-07-28)."""
    result = msgspec.json.decode(RESULT % b"1", type=dict[str, msgspec.Raw])["result"]
    assert benchmark(splice.complete_result, b"1", result).startswith(
        b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete",'
    )


@pytest.mark.parametrize("splice", SPLICES)
def test_splice_call_message(benchmark, splice):
    """call_message for a tools/call's arguments."""
    arguments = msgspec.json.decode(LEGACY_BODY, type=dict[str, msgspec.Raw])["params"]
    assert benchmark(splice.call_message, b"12345", b"echo", arguments).startswith(
        b'{"type":"call","id":"12345"'
    )


@pytest.mark.parametrize("splice", SPLICES)
def test_splice_result_shape(benchmark, splice):
    """result_shape of a tool result as an app sends it."""
    result = msgspec.json.decode(b'[{"content":[{"type":"text","text":"hi"}]}]', type=list[msgspec.Raw])[0]
    assert benchmark(splice.result_shape, result) == speedups.SHAPE_CONTENT


@pytest.mark.parametrize("splice", SPLICES)
def test_splice_array_length(benchmark, splice):
    """array_length of a 2025-03-26 batch of two calls (a body not starting with `{`)."""
    batch = b"[" + LEGACY_BODY + b"," + LEGACY_BODY + b"]"
    assert benchmark(splice.array_length, batch, 1000) == 2


@pytest.mark.parametrize("target", [b"/mcp", b"/mcp/eyJhbGciOiJIUzI1NiJ9.e30.c2ln", b"/connect"])
@pytest.mark.parametrize("routing", ROUTING)
def test_route(benchmark, routing, target):
    """route() of the request targets the bridge serves."""
    kind, _ = benchmark(routing.route, target)
    assert kind != speedups.ROUTE_NOT_FOUND


# -- the core, with the implementation speedups picked ----------------------------------


class DiscardLink(Link):
    """A WebSocket link that drops what is written: the bytes are not what is measured."""

    def write(self, data: bytes) -> None:
        pass

    def write_now(self, data: bytes) -> None:
        pass

    def end(self, wait_for_peer: bool) -> None:
        pass


class RecordingExchange(Exchange):
    """The agent endpoint's Exchange port, keeping only the answer's status and body."""

    __slots__ = ("body", "status")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.on_abandon = None
        self.status = None
        self.body = b""

    def respond(self, status: int, headers, body: bytes) -> None:
        self.status = status
        self.body = body

    def start_stream(self, headers) -> None:
        raise AssertionError("a tools/call answered at once never streams")

    def stream(self, data: bytes) -> None:
        raise AssertionError("a tools/call answered at once never streams")

    def end_stream(self) -> None:
        raise AssertionError("a tools/call answered at once never streams")


class Core:
    """A bridge with one app `bench` that registered `echo`, and the agent endpoint in front of it.

    `generations`: the verifier keeps token generations (a state file's, 1,000 raised), as
    with `--state`; the tokens are of generation 0.
    """

    def __init__(self, generations: bool = False) -> None:
        self.now = time.time()
        verifier = TokenVerifier([SECRET])
        if generations:
            Generations([("agent", f"other-{n}", 1) for n in range(1000)]).attach(verifier)
        self.bridge = Bridge(Limits(), verifier, lambda when: None, new_session_id=new_session_id)
        self.agents = AgentEndpoint(self.bridge, verifier, None)
        self.channel = AppChannel(self.bridge, DiscardLink(), self.now)
        self.channel.open(mint(SECRET, "client", "bench", 3600, self.now), self.now)
        self.channel.on_text(REGISTER)
        assert self.channel.toolset is not None
        token = mint(SECRET, "agent", "bench", 3600, self.now).encode()
        common = {
            b"host": b"127.0.0.1:8080",
            b"authorization": b"Bearer " + token,
            b"accept": b"application/json, text/event-stream",
            b"content-type": b"application/json",
        }
        self.legacy = {
            **common,
            b"mcp-protocol-version": b"2025-11-25",
            b"mcp-session-id": b"0123456789abcdef",
        }
        self.modern = {
            **common,
            b"mcp-protocol-version": b"2026-07-28",
            b"mcp-method": b"tools/call",
            b"mcp-name": b"echo",
        }

    def exchange(self, modern: bool) -> RecordingExchange:
        headers, body = (self.modern, MODERN_BODY) if modern else (self.legacy, LEGACY_BODY)
        return RecordingExchange(request_with_headers(b"POST", b"/mcp", headers, frozenset(), body, True))

    def answer(self) -> None:
        """The app answers the one call in flight."""
        (call_id,) = self.channel.calls
        self.channel.on_text(RESULT % call_id.encode())


AGENT_REQUEST = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer " + b"t" * 180 + b"\r\n"
    b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    b"MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: 0123456789abcdef\r\n"
    b"Content-Length: %d\r\n\r\n%b" % (len(LEGACY_BODY), LEGACY_BODY)
)


@pytest.mark.parametrize("http_reader", HTTP_READERS)
def test_read_agent_request(benchmark, http_reader):
    """RequestReader.feed of a whole tools/call request, as an agent sends it (8 headers)."""
    queue = deque()
    reader = http_reader.RequestReader(queue, Request, 16 * 1024, MAX_MESSAGE_BYTES)
    benchmark.extra_info["speedups"] = http_reader.__name__

    def read():
        reader.feed(AGENT_REQUEST)
        return queue.pop()

    request = benchmark(read)
    assert request.body == LEGACY_BODY and request.headers[b"mcp-session-id"] == b"0123456789abcdef"


@pytest.mark.parametrize("generations", ["generations-off", "generations-on"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_agent_endpoint_tools_call(benchmark, era, generations):
    """AgentEndpoint.handle of a tools/call, up to the call sent to the app; with and without generations."""
    core = Core(generations=generations == "generations-on")
    modern = era == "modern"
    benchmark.extra_info["speedups"] = speedups.IMPLEMENTATION
    exchanges = []

    def setup():
        exchanges.append(core.exchange(modern))
        return (exchanges[-1], b"", core.now), {}

    def teardown(exchange, path_token, now):
        assert exchange.status is None and len(core.channel.calls) == 1
        core.answer()
        assert exchange.status == 200 and b'"text":"hi"' in exchange.body

    benchmark.pedantic(core.agents.handle, setup=setup, teardown=teardown, rounds=5000, warmup_rounds=200)
    # With --benchmark-disable the call runs once and teardown does not: answer it here.
    while core.channel.calls:
        core.answer()
    assert exchanges and exchanges[-1].status == 200


def test_channel_on_text_result(benchmark):
    """AppChannel.on_text of the app's result, through to the agent's answer."""
    core = Core()
    benchmark.extra_info["speedups"] = speedups.IMPLEMENTATION
    answered = []

    def setup():
        exchange = core.exchange(False)
        answered.append(exchange)
        core.agents.handle(exchange, b"", core.now)
        (call_id,) = core.channel.calls
        return (RESULT % call_id.encode(),), {}

    benchmark.pedantic(core.channel.on_text, setup=setup, rounds=5000, warmup_rounds=200)
    assert all(exchange.status == 200 for exchange in answered) and not core.channel.calls
