"""The bench's references keep doing the work they stand for: `python -m bench.instructions`'s
harness makes real round trips, and `bench/floor.py --bridge` forwards real calls.

Run by `make test-bench` (valgrind counts the harness), not by `make test`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from bench import instructions

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("era", ["legacy", "modern", "minimal"])
def test_the_counting_harness_makes_a_real_tool_call(era):
    one = instructions.round_trip(era)
    for _ in range(2):  # the second call too: the first leaves nothing behind that the next one needs
        head, _, body = one().partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b'{"jsonrpc":"2.0","id":1,"result":' + (
            b'{"resultType":"complete","content":[{"type":"text","text":"hi"}]}}'
            if era == "modern"
            else b'{"content":[{"type":"text","text":"hi"}]}}'
        )


@pytest.mark.parametrize(("era", "agents"), [("forwarded", 1), ("forwarded", 3), ("legacy", 3)])
def test_the_counting_harness_makes_real_calls_from_several_agents_and_across_instances(era, agents):
    # `forwarded`: the agents on instance B, the app on A (turn_round_trip checks that B holds a RemoteApp).
    one = instructions.round_trip(era, agents=agents)
    for _ in range(2):
        head, _, body = one().partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'


@pytest.mark.parametrize(("era", "agents"), [("legacy", 1), ("legacy", 3), ("forwarded", 3)])
def test_every_harness_writes_a_line_per_call_at_log_info(era, agents, monkeypatch, tmp_path):
    # `--log info` must count the call lines whatever the harness: with several agents per turn
    # and across instances too (there, the agents' instance alone writes a call's line).
    from clientmcp_fast import log

    saved = (
        list(log.logger.handlers),
        log.logger.level,
        log.logger.propagate,
        log.debug_enabled,
        log._handler,
        log._json_lines,
    )
    written = tmp_path / "log"
    monkeypatch.setenv(instructions._LOG_ENV, "info")
    monkeypatch.setattr(instructions.os, "devnull", str(written))  # where configure_log writes
    try:
        one = instructions.round_trip(era, agents=agents)
        for _ in range(2):
            one()
    finally:
        (
            log.logger.handlers[:],
            log.logger.level,
            log.logger.propagate,
            log.debug_enabled,
            log._handler,
            log._json_lines,
        ) = saved
    lines = [line for line in written.read_text().splitlines() if " info call " in line]
    assert len(lines) == 2 * agents, lines
    assert all(" tool=echo " in line and " outcome=result " in line for line in lines), lines


def test_joined_instances_know_each_other_through_the_in_memory_nats():
    loop = instructions.StepLoop()
    (a, b), end_turn = instructions.joined(loop, 2)
    assert set(a.cluster.directory.peers) == {b.cluster.instance}
    assert set(b.cluster.directory.peers) == {a.cluster.instance}


def test_the_counting_harness_gets_the_exact_pong():
    assert instructions.round_trip("ping")() == b'\x81\x0f{"type":"pong"}'


def test_drive_times_its_calls():
    assert instructions.drive("legacy", 3) > 0.0


@pytest.mark.parametrize("era", ["legacy", "modern", "ping", "minimal", "forwarded"])
def test_the_stubbed_harness_never_reaches_the_bridge(era):
    # Counted as the harness's own share: a call that reached the bridge would be subtracted from it.
    one = instructions.round_trip(era, stub_calls=2)
    canned = b'\x81\x0f{"type":"pong"}' if era == "ping" else b"HTTP/1.1 200 OK\r\n\r\n"
    assert one() == canned
    assert one() == canned
    with pytest.raises(IndexError):  # nothing but the canned answers was written
        one()


def oauth_traffic(monkeypatch) -> tuple[list[object], list[bytes], list[bytes]]:
    """The OAuth endpoints made from now on, the targets they were asked for, and every request the harness sent."""
    from clientmcp_fast.net.oauth import OAuthEndpoints

    made: list[object] = []
    asked: list[bytes] = []
    sent: list[bytes] = []
    init, handle, request = OAuthEndpoints.__init__, OAuthEndpoints.handle, instructions.http_request

    def recorded_init(self, server):
        made.append(self)
        init(self, server)

    def recorded_handle(self, exchange, now):
        asked.append(exchange.request.target)
        return handle(self, exchange, now)

    def recorded_request(*args):
        sent.append(request(*args))
        return sent[-1]

    monkeypatch.setattr(OAuthEndpoints, "__init__", recorded_init)
    monkeypatch.setattr(OAuthEndpoints, "handle", recorded_handle)
    monkeypatch.setattr(instructions, "http_request", recorded_request)
    return made, asked, sent


@pytest.mark.parametrize("era", ["legacy", "modern", "forwarded"])
def test_the_oauth_harness_calls_the_apps_resource_with_an_access_token(era, monkeypatch):
    # `--oauth`: each call is a request to /apps/bench/mcp with an access token for that
    # resource as /oauth/token issues it, served by the agent endpoint as a call on /mcp is:
    # net/oauth.py, which answers the resource's refusals, is never asked.
    from clientmcp_fast.core.tokens import verified_claims

    monkeypatch.setenv(instructions._OAUTH_ENV, "resource")
    made, asked, sent = oauth_traffic(monkeypatch)
    one = instructions.round_trip(era)
    for _ in range(2):
        head, _, body = one().partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert b'"content":[{"type":"text","text":"hi"}]' in body
    assert made and asked == []  # the bridge (in `forwarded`, each instance) runs with OAuth on
    assert sent and all(request.startswith(b"POST /apps/bench/mcp HTTP/1.1\r\n") for request in sent)
    token = sent[0].split(b"Authorization: Bearer ", 1)[1].split(b"\r\n", 1)[0].decode()
    claims = verified_claims((instructions.SECRET,), token)
    assert (claims["role"], claims["sub"]) == ("agent", "bench")
    assert claims["aud"] == f"{instructions.PUBLIC_URL}/apps/bench/mcp"  # a static token has no aud


def test_the_oauth_harness_can_call_mcp_with_the_static_token_oauth_on(monkeypatch):
    # `--oauth mcp`: the bridge with OAuth on, the call on /mcp as without it.
    monkeypatch.setenv(instructions._OAUTH_ENV, "mcp")
    made, asked, sent = oauth_traffic(monkeypatch)
    one = instructions.round_trip("legacy")
    for _ in range(2):
        assert one().startswith(b"HTTP/1.1 200 OK")
    assert len(made) == 1 and asked == []
    assert sent and all(request.startswith(b"POST /mcp HTTP/1.1\r\n") for request in sent)


@pytest.mark.parametrize("era", ["ping", "minimal"])
def test_oauth_is_refused_where_no_agent_calls_the_bridge(era):
    argv = [sys.executable, "-m", "bench.instructions", "--era", era, "--oauth"]
    refused = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert refused.returncode == 2
    assert f"--oauth makes an agent's call through the bridge: not with --era {era}" in refused.stderr


@pytest.fixture
def minimal_bridge():
    """`python -m bench.floor --bridge PORT` running: its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.floor", "--bridge", str(port)], stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        assert process.stdout.readline() == b"up\n"
        yield port
    finally:
        process.kill()
        process.wait()


def post_call(port: int) -> socket.socket:
    """An agent's tools/call, sent; the open socket."""
    agent = socket.create_connection(("127.0.0.1", port), timeout=5)
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}'
    agent.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return agent


def test_the_minimal_bridge_forwards_a_call_to_its_app_and_the_result_back(minimal_bridge):
    # The reference the bench compares the bridge with must make the same round trip; here
    # the app is the `websockets` library, not the bench's own app.
    with connect(f"ws://127.0.0.1:{minimal_bridge}/connect", ping_interval=None) as app:
        app.send('{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}')
        assert app.recv(timeout=5) == '{"type":"registered"}'
        gone = post_call(minimal_bridge)  # an agent that leaves before its answer
        call = json.loads(app.recv(timeout=5))
        assert call == {"type": "call", "id": "1", "name": "echo", "arguments": {"text": "hi"}}
        gone.close()
        time.sleep(0.1)
        app.send('{"type":"result","id":"1","result":{"content":[]}}')
        with post_call(minimal_bridge) as agent:
            call = json.loads(app.recv(timeout=5))
            assert call["id"] == "2"
            app.send('{"type":"result","id":"2","result":{"content":[{"type":"text","text":"hi"}]}}')
            answer = agent.recv(4096)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "hi"}]},
    }


CALLGRIND_OUTPUT = """# callgrind format
version: 1
events: Ir I1mr D1mr
fn=(1) main
0 5 1 0
summary: 1500 30 12
totals: 1500 30 12
"""


def test_callgrind_totals_are_read_by_event_name():
    assert instructions.callgrind_totals(CALLGRIND_OUTPUT) == {"Ir": 1500, "I1mr": 30, "D1mr": 12}


def test_callgrind_counts_the_round_trip_and_the_harness():
    # Only that the counting works end to end; the figures are the bench's to report. Enough
    # calls that a one-time cost (a collection, a resize) is spread thin: with 5, one made the
    # harness's count per call negative on CI.
    assert shutil.which("valgrind"), "valgrind is needed: apt-get install -y valgrind"
    share = instructions.bridge_share("minimal", 300, cache=True)
    assert share["counted"] > share["harness"] > 0
    assert share["Ir"] == share["counted"] - share["harness"]
    assert {"I1mr", "D1mr", "D1mw", "Bcm", "Bim"} <= share.keys()
    assert share["cycles"] > share["Ir"]


@pytest.mark.parametrize(("era", "asked"), [("legacy", "app"), ("modern", "app"), ("legacy", "agent")])
def test_the_traced_harness_gives_the_trace_context_to_an_app_that_asked_only(era, asked, monkeypatch):
    # `--trace app` counts a call carrying the agent's traceparent to an app that asked for it;
    # `--trace agent`, one whose agent sends it to an app that did not.
    monkeypatch.setenv(instructions._TRACE_ENV, asked)
    frames: list[bytes] = []
    call_id_of = instructions.call_id_of

    def recorded(frame: bytes) -> bytes:
        frames.append(frame)
        return call_id_of(frame)

    monkeypatch.setattr(instructions, "call_id_of", recorded)
    one = instructions.round_trip(era)
    for _ in range(2):
        assert one().partition(b"\r\n\r\n")[0].startswith(b"HTTP/1.1 200 OK")
    assert len(frames) == 2
    traced = b'"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'
    assert all((traced in frame) == (asked == "app") for frame in frames)


def test_the_otel_harness_traces_every_call(monkeypatch):
    # `--otel`: the bridge's tracer is the one `serve` makes, told of each call's start and end.
    from clientmcp_fast.otel import OtelCallTracing

    monkeypatch.setenv(instructions._OTEL_ENV, "1")
    told: list[str] = []
    started, ended = OtelCallTracing.started, OtelCallTracing.ended

    def on_start(self, call):  # type: ignore[no-untyped-def]
        told.append("started")
        return started(self, call)

    def on_end(self, call, outcome):  # type: ignore[no-untyped-def]
        told.append("ended")
        return ended(self, call, outcome)

    monkeypatch.setattr(OtelCallTracing, "started", on_start)
    monkeypatch.setattr(OtelCallTracing, "ended", on_end)
    one = instructions.round_trip("legacy")
    for _ in range(2):
        assert one().partition(b"\r\n\r\n")[0].startswith(b"HTTP/1.1 200 OK")
    assert told == ["started", "ended"] * 2


@pytest.mark.parametrize("scope", [0, 3], ids=["unscoped", "scope 3"])
@pytest.mark.parametrize("limits", [False, True], ids=["limits off", "limits on"])
def test_the_scope_and_limits_harness_calls_through_them(scope, limits, monkeypatch):
    # `--scope N`: the agent's token names N tools, `echo` the last; `--limits`: the per-token
    # limits on at their defaults, passed by every call counted. The scoped tokens' and limits'
    # counts are made with these (docs/benchmarks.md, Where the time goes).
    from clientmcp_fast.core.limits import Limits

    if scope:
        monkeypatch.setenv(instructions._SCOPE_ENV, str(scope))
    if limits:
        monkeypatch.setenv(instructions._LIMITS_ENV, "1")
    servers = []
    made = instructions.observed
    monkeypatch.setattr(
        instructions, "observed", lambda server, *rest: servers.append(server) or made(server, *rest)
    )
    one = instructions.round_trip("legacy")
    # More calls than the rate's burst of 1,000: the harness's clock keeps the bucket from running dry.
    for _ in range(1_500 if limits else 3):
        head, _, body = one().partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}'
    (server,) = servers
    defaults = Limits()
    expected = (defaults.agent_rate, defaults.agent_max_calls) if limits else (0, 0)
    assert (server.agents.agent_rate, server.bridge.max_calls_per_token) == expected
    grants = [grant for grant in server.verifier._cache.values() if grant.role == "agent"]
    assert len(grants) == 1 and grants[0].in_flight == 0
    if scope:
        assert grants[0].scope.key == {"other_0", "other_1", "echo"}
    else:
        assert grants[0].scope is None
