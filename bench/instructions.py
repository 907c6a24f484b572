"""Instructions per tools/call, counted by callgrind: a measure of the bridge's own work that noise cannot move.

    python -m bench.instructions [--era legacy|modern|ping|minimal|forwarded] [--calls 1000] [--cache]
                                 [--generations N] [--agents K] [--scope N] [--limits] [--oauth [mcp]]

One tools/call goes through the real `HttpProtocol` (request in, answer out) and the
app's `AppChannel` (call out, result in) over fake transports, so no syscall or event
loop is counted (what the bridge schedules with `call_soon` is run by the harness, see
`StepLoop`). `--era ping` counts an app's exact `{"type":"ping"}` and its pong instead;
`--era minimal` counts the legacy call through the minimal bridge (`bench/floor.py
--bridge`, nothing checked) on the same harness: the yardstick for the bridge's count.
`--era forwarded` counts a legacy call made on one instance of a cluster for an app held
by another: both instances in one process, NATS in memory (see `joined`), against `--era
legacy`. `--agents K` makes K calls per loop turn from K agents (legacy and forwarded),
so that what is sent once per turn is shared, as under load. The command runs itself
under `valgrind --tool=callgrind` for N and 2N calls and prints the difference divided
by N, once with the bridge and once with the bridge's entry
points replaced by canned answers: the second is the harness's own share, and the first
minus the second is the bridge's. `--cache` also has callgrind simulate the caches and
branch predictors, and prints the misses and the cycles they add up to (`CYCLE_WEIGHTS`):
what instructions alone do not tell, for code whose footprint is larger. `--drive N
[--stub]` (used by that) just makes the calls. CLIENTMCP_NO_EXTENSIONS=1 counts the
pure-Python twins. `--generations N` keeps token generations (as `--state` does) for N
other client IDs in each role: the count with revocation on. `--log LEVEL` logs at that
level (to /dev/null; the default is warn: no line per call), `--metrics` builds the metrics
collector as `--metrics` does (the core counts either way): the count with observability on
(docs/operations.md). The per-token limits (docs/configuration.md, Agent limits) are off
unless `--limits` turns them on at their defaults; `--scope N` scopes the agent's token to N
tool names, the called one among them (docs/protocol.md, Scoped agent tokens). `--trace
agent` has the agent send a `traceparent` header to an app that did not ask for it; `--trace
app` to an app that registered `trace: true`, so the count is that of a call carrying the
agent's trace context to the app, the bridge not tracing itself;
`--otel` has the bridge trace (a span per call, made and queued as `serve` does with the
`otel` extra, exported nowhere). `--oauth` runs the bridge with OAuth on (docs/oauth.md) and
makes the call on the app's resource, `/apps/bench/mcp`, with an access token issued as the
token endpoint issues it; `--oauth mcp` runs it with OAuth on and makes the call on `/mcp`
with the static agent token, as without the flag.
"""

from __future__ import annotations

import argparse
import itertools
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import uvloop

from bench.floor import MiniBridge, MiniBridgeConnection
from clientmcp_fast.config import Settings
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.limits import Limits
from clientmcp_fast.core.tokens import mint
from clientmcp_fast.net.http import HttpProtocol
from clientmcp_fast.net.server import Server
from clientmcp_fast.net.websocket import WebSocketProtocol
from clientmcp_fast.speedups import FrameReader

SECRET = b"bench-instructions-secret-0123456789abcdef"
REGISTER = b'{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}'
LEGACY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
    b"MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: abc\r\n",
)
MODERN = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},'
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
    b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
)
PONG_FRAME = b'\x81\x0f{"type":"pong"}'
# `--log` and `--metrics`, passed to the runs callgrind counts through their environment.
_LOG_ENV = "CLIENTMCP_BENCH_LOG"
_METRICS_ENV = "CLIENTMCP_BENCH_METRICS"
# `--scope N` and `--limits`, the same way.
_SCOPE_ENV = "CLIENTMCP_BENCH_SCOPE"
_LIMITS_ENV = "CLIENTMCP_BENCH_LIMITS"
# `--trace agent|app`: the agent sends a traceparent; with `app`, the app registers `trace: true`.
_TRACE_ENV = "CLIENTMCP_BENCH_TRACE"
# `--otel`: the bridge traces, a span per call (clientmcp_fast/otel.py).
_OTEL_ENV = "CLIENTMCP_BENCH_OTEL"
# `--oauth`: "resource" (an access token on the app's resource) or "mcp" (the static token on /mcp).
_OAUTH_ENV = "CLIENTMCP_BENCH_OAUTH"
# The public URL with OAuth on: the origin the agent's request names in its Host header.
PUBLIC_URL = "http://127.0.0.1:8080"
OAUTH_REDIRECT = "http://127.0.0.1:33418/callback"
OAUTH_VERIFIER = "bench-instructions-pkce-verifier-0123456789abcdef"
TRACEPARENT = b"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
TRACED_REGISTER = REGISTER[:-1] + b',"trace":true}'


class FakeTransport:
    """Keeps what is written; everything else a transport does is a no-op."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        # C methods, not Python ones, for what the bridge calls per call: a real transport's
        # work is not ours to count, and an interpreted stand-in would cost more than uvloop's.
        self.write = self.written.append
        self.is_closing = False.__bool__  # always False
        self.get_write_buffer_size = (0).__index__  # always 0

    def close(self) -> None: ...
    def abort(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...


class StepLoop(uvloop.Loop):
    """A uvloop loop whose `call_soon` callbacks run when the harness says, not in a loop turn.

    Never running, a real loop would keep every scheduled handle: they pile up and the
    garbage collector walks them all, a cost growing with the number of calls made. The
    bridge's hot path schedules only callbacks without arguments, so `call_soon` here is
    a list's `append`: next to nothing, like the handle a real loop turn would make and run.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ready: list[Callable[[], object]] = []
        self.call_soon = self.ready.append  # type: ignore[method-assign,assignment]

    def run_ready(self) -> None:
        """Run what was scheduled, as the end of a loop turn would."""
        ready = self.ready
        while ready:
            ready.pop(0)()


MASKED_HEADS = [bytes((0x81, 0x80 | size)) + b"\0\0\0\0" for size in range(126)]
RESULT_HEAD = b'{"type":"result","id":"'
RESULT_TAIL = b'","result":{"content":[{"type":"text","text":"hi"}]}}'


def client_text(payload: bytes) -> bytes:
    """A masked client text frame (with a zero key, so the payload reads as it is)."""
    size = len(payload)
    if size < 126:
        return MASKED_HEADS[size] + payload
    return bytes((0x81, 0x80 | 126)) + size.to_bytes(2, "big") + b"\0\0\0\0" + payload


def call_id_of(frame: bytes) -> bytes:
    """The id of the `call` in an unmasked server frame."""
    start = frame.index(b'"id":"') + 6
    return frame[start : frame.index(b'"', start)]


def connected_app(
    server: Server, loop: StepLoop, now: float
) -> tuple[FakeTransport, WebSocketProtocol, AppChannel]:
    """The app `bench` on `server`, its token accepted and its register read (answered once the turn ends)."""
    app_transport = FakeTransport()
    link = WebSocketProtocol(server, app_transport)  # type: ignore[arg-type]
    channel = AppChannel(server.bridge, link, loop.time())
    link.start(channel, mint(SECRET, "client", "bench", 3600, now), b"")
    register = TRACED_REGISTER if os.environ.get(_TRACE_ENV) == "app" else REGISTER
    channel.receive_data(client_text(register), loop.time())
    return app_transport, link, channel


def configure_log() -> None:
    """`--log`: the log configured before any bridge is made, since a bridge reads once whether calls are logged."""
    level = os.environ.get(_LOG_ENV)
    if level:
        from clientmcp_fast import log

        log.configure(level, open(os.devnull, "w"))  # noqa: SIM115 - for the process's life


def observed(server: Server, generations: int) -> Server:
    """A bridge just made, with `--metrics` and `--generations` (token generations for that many other IDs) applied."""
    if os.environ.get(_METRICS_ENV):
        from clientmcp_fast.metrics import registry_for

        registry_for(server)  # read at scrape time only: a scrape is not part of a call
    if os.environ.get(_OTEL_ENV):
        server.bridge.tracing = bench_tracing()
    if generations:
        raised = {f"other-{n}": 1 for n in range(generations)}
        server.verifier.generations = {"client": dict(raised), "agent": dict(raised)}
    return server


def bench_tracing():
    """`--otel`: the tracer `serve` makes from OTEL_* settings, its spans batched as there but exported nowhere.

    The batch processor hands each ended span to its queue as in production; its exporter
    drops them, so what is counted is the span's making, its attributes and its queueing,
    not the encoding and sending that the processor's own thread does every few seconds.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from clientmcp_fast.otel import OtelCallTracing

    class Dropped(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return OtelCallTracing(provider.get_tracer("clientmcp_fast"), provider)


def round_trip(era: str, stub_calls: int = 0, generations: int = 0, agents: int = 1) -> Callable[[], bytes]:
    """A bridge with one app online, and a function making one tools/call (or ping) through it: the answer.

    With `stub_calls`, the bridge's entry points are replaced by list appends and its
    answers are canned, enough for that many calls: what is left is the harness alone.
    With `generations`, token generations are kept (as with `--state`) for that many other
    client IDs in each role, so every request's token is checked against them.
    """
    if era == "minimal":
        return minimal_round_trip(stub_calls)
    configure_log()
    if era == "forwarded" or agents > 1:
        return turn_round_trip(era, agents, stub_calls, generations)
    loop = StepLoop()
    if os.environ.get(_LIMITS_ENV):
        # A clock a millisecond ahead at each reading (a C call, as uvloop's is): the rate's
        # bucket, refilled at least as fast as the harness calls, is never empty, however fast
        # the machine, and every call counted is one that passes the limits.
        loop.time = itertools.count(time.monotonic(), 0.001).__next__  # type: ignore[method-assign]
    server = observed(
        Server(bench_settings(), loop),
        generations,
    )
    now = time.time()
    app_transport, link, channel = connected_app(server, loop, now)
    loop.run_ready()
    agent_transport = FakeTransport()
    http = HttpProtocol(server)
    http.connection_made(agent_transport)  # type: ignore[arg-type]
    body, headers = MODERN if era == "modern" else LEGACY
    request = http_request(body, headers, now)
    ping = client_text(b'{"type":"ping"}')
    on_request, on_app_data, on_link_data = http.data_received, channel.receive_data, link.data_received
    if stub_calls:
        # What the bridge would write, already written; what it is fed, kept.
        fed: list[object] = []
        on_request = on_link_data = fed.append
        # A C function of two arguments doing nothing: an interpreted stand-in (a lambda) would
        # count a Python call as the harness's, and so take it off the bridge's share.
        on_app_data = operator.is_
        if era == "ping":
            app_transport.written[:] = [PONG_FRAME] * stub_calls
        else:
            stub_answers(app_transport, agent_transport, stub_calls)

    def one_ping() -> bytes:
        on_link_data(ping)
        loop.run_ready()
        return app_transport.written.pop()

    if era == "ping":
        return one_ping
    return calls_through(loop, request, on_request, on_app_data, app_transport, agent_transport, timed=True)


def minimal_round_trip(stub_calls: int = 0) -> Callable[[], bytes]:
    """`round_trip` for the legacy call through the minimal bridge, its app already connected."""
    loop = StepLoop()
    bridge = MiniBridge(loop)
    app_transport, agent_transport = FakeTransport(), FakeTransport()
    app = MiniBridgeConnection(bridge)
    app.connection_made(app_transport)  # type: ignore[arg-type]
    app.frames = FrameReader(1 << 20)
    bridge.app = app_transport  # type: ignore[assignment]
    agent = MiniBridgeConnection(bridge)
    agent.connection_made(agent_transport)  # type: ignore[arg-type]
    # The bridge's legacy request, byte for byte: the minimal bridge just reads none of its headers.
    request = http_request(*LEGACY, time.time())
    on_request, on_app_data = agent.data_received, app.data_received
    if stub_calls:
        fed: list[object] = []
        on_request = on_app_data = fed.append
        stub_answers(app_transport, agent_transport, stub_calls)
    return calls_through(loop, request, on_request, on_app_data, app_transport, agent_transport, timed=False)


def joined(loop: StepLoop, count: int) -> tuple[list[Server], Callable[[], None]]:
    """`count` bridges joined as a cluster, with NATS in memory; and the function ending a loop turn.

    Each is a `NatsCluster` (clientmcp_fast/net/nats.py) whose connection never publishes:
    what its directory sends in a turn waits in its batches, as in a real turn, and ending
    the turn encodes and signs them as `_flush` does and hands each payload to the
    others subscribed to its subject through their own `_deliver`, as nats-py's reader would. What
    nats-py and the nats-server do with a payload is theirs, not counted here.
    """
    from clientmcp_fast.net.nats import NatsCluster

    class Connected:
        is_connected = True
        max_payload = 8 * 1024 * 1024

    class Connection:  # the process's NATS connection (net/nats_connection.py), as the cluster reads it here
        instance = "0" * 12

    settings = bench_settings()
    servers, clusters = [], []
    for index in range(count):
        server = Server(settings, loop)
        cluster = NatsCluster(server, Connection())  # type: ignore[arg-type]
        # Fixed instance IDs: the counts do not depend on random subjects' lengths and hashes.
        name = f"{index:012x}"
        cluster.instance = cluster.directory.instance = cluster.directory.forwarding.instance = name
        cluster.auth.sender = name
        cluster.nc = Connected()
        cluster._flush_due = True  # never scheduled: the harness publishes at the end of the turn
        server.cluster = cluster
        servers.append(server)
        clusters.append(cluster)

    def subscribed(cluster: NatsCluster, subject: str) -> bool:
        for pattern in cluster.directory.subscriptions():
            if pattern == subject or (pattern[-2:] == ".*" and subject.rpartition(".")[0] == pattern[:-2]):
                return True
        return False

    routes: dict[tuple[int, str], list[NatsCluster]] = {}  # (sender, subject) -> the others subscribed

    def end_turn() -> None:
        loop.run_ready()
        sent = True
        while sent:
            sent = False
            for sender in clusters:
                if not sender._pending:
                    continue
                sent = True
                batches, sender._pending = sender._pending, {}
                for subject, messages in batches.items():
                    receivers = routes.get((id(sender), subject))
                    if receivers is None:
                        receivers = routes[id(sender), subject] = [
                            c for c in clusters if c is not sender and subscribed(c, subject)
                        ]
                    for payload in sender._payloads(subject, messages, Connected.max_payload, loop.time()):
                        head, body = sender.auth.seal(subject, payload, time.time())  # as _flush does
                        for cluster in receivers:
                            cluster._deliver(subject, head + body)
            loop.run_ready()

    for cluster in clusters:
        cluster.directory.bus_up(loop.time())
    end_turn()
    return servers, end_turn


CALL_IDS = re.compile(rb'"type":"call","id":"([^"]+)"')


def turn_round_trip(era: str, agents: int, stub_calls: int = 0, generations: int = 0) -> Callable[[], bytes]:
    """`round_trip` for `agents` legacy calls in one loop turn, each from its own agent connection.

    `era` "legacy": app and agents on one bridge. "forwarded": the agents on one instance (B)
    and the app on another (A), both counted with what passes between them (see `joined`):
    the bridge's work for a forwarded call on both sides. With many agents, what is sent
    once per turn (the app's writes, a NATS message per subject) is shared, as under load.
    """
    loop = StepLoop()
    if era == "forwarded":
        (app_side, agent_side), end_turn = joined(loop, 2)
        observed(app_side, generations)
        observed(agent_side, generations)
    else:
        settings = bench_settings()
        app_side = agent_side = observed(Server(settings, loop), generations)
        end_turn = loop.run_ready
    now = time.time()
    app_transport, _, channel = connected_app(app_side, loop, now)
    end_turn()
    app = agent_side.bridge.apps["bench"]
    if app.toolset is None or (era == "forwarded") != agent_side.bridge.router.is_remote(app):
        raise RuntimeError(f"the agents' instance holds {app!r} for the app")
    app_transport.written.clear()
    agent_transports = [FakeTransport() for _ in range(agents)]
    on_requests = []
    for transport in agent_transports:
        http = HttpProtocol(agent_side)
        http.connection_made(transport)  # type: ignore[arg-type]
        on_requests.append(http.data_received)
    request = http_request(*LEGACY, now)
    on_app_data = channel.receive_data
    written = app_transport.written
    if stub_calls:
        fed: list[object] = []
        on_requests = [fed.append] * agents
        on_app_data = operator.is_
        stub_answers(app_transport, agent_transports[0], stub_calls * agents)
        calls = [b"\x81" + bytes((len(CALL),)) + CALL] * agents
        for transport in agent_transports[1:]:
            transport.written[:] = agent_transports[0].written

        def end_turn() -> None:  # what the bridges would have written, written
            loop.run_ready()
            written[:] = calls

    def one() -> bytes:
        for on_request in on_requests:
            on_request(request)
        end_turn()
        frames = b"".join(written)
        written.clear()
        on_app_data(
            b"".join([client_text(RESULT_HEAD + id_ + RESULT_TAIL) for id_ in CALL_IDS.findall(frames)]), 0.0
        )
        end_turn()
        return [transport.written.pop() for transport in agent_transports][-1]

    return one


def calls_through(
    loop: StepLoop,
    request: bytes,
    on_request: Callable[[bytes], object],
    on_app_data: Callable[..., object],
    app_transport: FakeTransport,
    agent_transport: FakeTransport,
    timed: bool,
) -> Callable[[], bytes]:
    """A function making one call: the request in, the app's result to the call it was sent, the answer.

    `timed`: the app's data is handed over with the time (the bridge's channel), not alone.
    """

    def one() -> bytes:
        on_request(request)
        loop.run_ready()
        result = client_text(b"".join((RESULT_HEAD, call_id_of(app_transport.written.pop()), RESULT_TAIL)))
        # Called directly, not with unpacked arguments: the harness's share stays small.
        if timed:
            on_app_data(result, 0.0)
        else:
            on_app_data(result)
        loop.run_ready()
        return agent_transport.written.pop()

    return one


def bench_settings() -> Settings:
    """The bridge's settings: the per-token limits off, unless `--limits` (then at their defaults); `--oauth`."""
    limits = Limits() if os.environ.get(_LIMITS_ENV) else Limits(agent_rate=0, agent_max_calls=0)
    oauth = {"oauth": True, "public_url": PUBLIC_URL} if os.environ.get(_OAUTH_ENV) else {}
    return Settings(
        secrets=(SECRET,), signing_secret=SECRET, host="127.0.0.1", port=0, limits=limits, **oauth
    )


def access_token(now: float, tools: list[str] | None) -> str:
    """An access token for the app `bench`, issued at `now` as `/oauth/token` issues one (docs/oauth.md).

    A client registers, its request is consented to (with `tools`, as an app may scope its
    consent) and its code redeemed with the PKCE verifier, each by the core's authorization
    server; the bridge's own instance would take the same token, signed with the same secret.
    """
    from urllib.parse import urlencode

    from clientmcp_fast.core.oauth import AuthorizationServer, s256  # with --oauth only, as serve does

    server = AuthorizationServer(PUBLIC_URL, (SECRET,), SECRET, os.urandom)
    registration = {"redirect_uris": [OAUTH_REDIRECT], "client_name": "bench"}
    client_id = msgspec.json.decode(server.register(msgspec.json.encode(registration), now))["client_id"]
    resource = server.resource_url("bench")
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": OAUTH_REDIRECT,
        "state": "bench",
        "code_challenge": s256(OAUTH_VERIFIER),
        "code_challenge_method": "S256",
        "resource": resource,
    }
    request = server.authorize_request(urlencode(query).encode())
    code = server.issue_code(request, now, 0, tools)  # the app's agent generation: none revoked
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": client_id,
        "redirect_uri": OAUTH_REDIRECT,
        "code_verifier": OAUTH_VERIFIER,
        "resource": resource,
    }
    answer = server.token(urlencode(form).encode(), now, lambda app_id: 0)
    return msgspec.json.decode(answer)["access_token"]


def http_request(body: bytes, headers: bytes, now: float) -> bytes:
    """The agent's POST /mcp, signed in at `now`, with `headers` (each ending in CRLF) beside the usual ones.

    With `--scope N`, its token is scoped to N tool names, `echo` among them (the last). With
    `--oauth`, it is a POST to the app's resource, `/apps/bench/mcp`, with an access token.
    """
    names = int(os.environ.get(_SCOPE_ENV) or 0)
    tools = [*(f"other_{n}" for n in range(names - 1)), "echo"] if names else None
    if os.environ.get(_OAUTH_ENV) == "resource":
        target, token = b"/apps/bench/mcp", access_token(now, tools).encode()
    else:
        target, token = b"/mcp", mint(SECRET, "agent", "bench", 3600, now, tools=tools).encode()
    return (
        b"POST " + target + b" HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer " + token + b"\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        + headers
        + (TRACEPARENT if os.environ.get(_TRACE_ENV) else b"")
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


CALL = b'{"type":"call","id":"1","name":"echo","arguments":{"text":"hi"}}'


def stub_answers(app_transport: FakeTransport, agent_transport: FakeTransport, calls: int) -> None:
    """Write, ahead, what a stubbed bridge would have written for `calls` calls."""
    app_transport.written[:] = [b"\x81" + bytes((len(CALL),)) + CALL] * calls
    agent_transport.written[:] = [b"HTTP/1.1 200 OK\r\n\r\n"] * calls


def drive(era: str, calls: int, stub: bool = False, generations: int = 0, agents: int = 1) -> float:
    """Make `calls` tool calls (or pings, or turns of `agents` calls) after a checked one and a warm-up; CPU seconds."""
    one = round_trip(era, calls + 201 if stub else 0, generations, agents)
    answer = one()
    if era == "ping":
        assert answer == PONG_FRAME, answer
    elif not stub:
        assert answer.startswith(b"HTTP/1.1 200 OK") and b'"text":"hi"' in answer, answer
    for _ in range(200):
        one()
    started = time.process_time()
    for _ in range(calls):
        one()
    return time.process_time() - started


# Cycles estimated from callgrind's simulated events, at the rough costs the Cachegrind manual
# gives: about 10 cycles per first-level miss and per mispredicted branch; a last-level miss
# costs 100-200 (the low end here: none is seen per call, the loop's data fits).
CYCLE_WEIGHTS = {"Ir": 1, "I1mr": 10, "D1mr": 10, "D1mw": 10, "ILmr": 100, "DLmr": 100, "DLmw": 100,
                 "Bcm": 10, "Bim": 10}  # fmt: skip


def events_per_call(
    era: str, calls: int, stub: bool = False, cache: bool = False, generations: int = 0, agents: int = 1
) -> dict[str, float]:
    """Callgrind's events per call: totals for N and 2N calls (counted side by side), differenced.

    Instructions (`Ir`) only, or with `cache` also the simulated cache misses and branch
    mispredictions.
    """
    simulate = ["--cache-sim=yes", "--branch-sim=yes"] if cache else []
    with tempfile.TemporaryDirectory() as out:
        runs = []
        for n in (calls, 2 * calls):
            argv = ["valgrind", "--tool=callgrind", *simulate, f"--callgrind-out-file={out}/{n}",
                    sys.executable, "-m", "bench.instructions", "--era", era, "--drive", str(n),
                    *(["--stub"] if stub else []), "--generations", str(generations),
                    "--agents", str(agents)]  # fmt: skip
            # A fixed hash seed: dict and set layouts, so the counts, repeat run after run.
            env = {**os.environ, "PYTHONHASHSEED": "0"}
            runs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env))
        for run in runs:
            _, errors = run.communicate()
            if run.returncode != 0:
                raise RuntimeError(f"callgrind failed ({run.returncode}): {errors.decode()[-2000:]}")
        first, second = (callgrind_totals(Path(out, str(n)).read_text()) for n in (calls, 2 * calls))
    return {event: (second[event] - first[event]) / (calls * agents) for event in first}


def callgrind_totals(text: str) -> dict[str, int]:
    """The whole run's count of each event, from a callgrind output file."""
    events = re.search(r"^events: (.+)$", text, re.MULTILINE).group(1).split()
    totals = re.search(r"^(?:summary|totals): (.+)$", text, re.MULTILINE).group(1).split()
    return dict(zip(events, map(int, totals), strict=True))


def bridge_share(
    era: str, calls: int, cache: bool = False, generations: int = 0, agents: int = 1
) -> dict[str, float]:
    """What the bridge (or the minimal bridge) adds per call: the round trip less the stubbed harness."""
    total = events_per_call(era, calls, cache=cache, generations=generations, agents=agents)
    harness = events_per_call(era, calls, stub=True, cache=cache, agents=agents)
    share = {event: total[event] - harness[event] for event in total}
    if cache:
        share["cycles"] = sum(weight * share.get(event, 0.0) for event, weight in CYCLE_WEIGHTS.items())
    share["counted"], share["harness"] = total["Ir"], harness["Ir"]
    return share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--era", choices=("legacy", "modern", "ping", "minimal", "forwarded"), default="legacy"
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--drive", type=int, metavar="N", help="only make N calls (what callgrind runs)")
    parser.add_argument(
        "--stub", action="store_true", help="with --drive: the harness alone, the bridge stubbed"
    )
    parser.add_argument(
        "--cache", action="store_true", help="also simulate the caches and branch predictors (slower)"
    )
    parser.add_argument(
        "--generations", type=int, default=0, metavar="N",
        help="keep token generations (as --state does) for N other client IDs in each role",
    )  # fmt: skip
    parser.add_argument(
        "--agents", type=int, default=1, metavar="K",
        help="legacy or forwarded: K calls per loop turn, from K agents (what is sent once per turn is shared)",
    )  # fmt: skip
    parser.add_argument("--log", choices=("error", "warn", "info", "debug"), help="log at this level")
    parser.add_argument("--metrics", action="store_true", help="with the metrics collector built")
    parser.add_argument(
        "--scope",
        type=int,
        default=0,
        metavar="N",
        help="the agent token scoped to N tool names (echo among them)",
    )
    parser.add_argument(
        "--limits", action="store_true", help="the per-token limits on at their defaults (else off)"
    )
    parser.add_argument(
        "--trace", choices=("app", "agent"),
        help="the agent sends a traceparent header; `app`: the app registered trace: true (docs/protocol.md)",
    )  # fmt: skip
    parser.add_argument(
        "--otel", action="store_true",
        help="the bridge traces: a span per call, batched, exported nowhere (needs the otel extra)",
    )  # fmt: skip
    parser.add_argument(
        "--oauth", nargs="?", const="resource", choices=("resource", "mcp"),
        help="the bridge with OAuth on: the call with an access token on /apps/bench/mcp "
        "(or, `--oauth mcp`, with the static token on /mcp)",
    )  # fmt: skip
    flags = parser.parse_args()
    if flags.oauth:
        if flags.era in ("ping", "minimal"):
            parser.error(f"--oauth makes an agent's call through the bridge: not with --era {flags.era}")
        os.environ[_OAUTH_ENV] = flags.oauth
    if flags.otel:
        os.environ[_OTEL_ENV] = "1"
    if flags.trace:
        os.environ[_TRACE_ENV] = flags.trace
    if flags.scope:
        os.environ[_SCOPE_ENV] = str(flags.scope)
    if flags.limits:
        os.environ[_LIMITS_ENV] = "1"
    if flags.log:
        os.environ[_LOG_ENV] = flags.log
    if flags.metrics:
        os.environ[_METRICS_ENV] = "1"
    if flags.drive is not None:
        drive(flags.era, flags.drive, flags.stub, flags.generations, flags.agents)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed: apt-get install valgrind")
    what = "ping and pong" if flags.era == "ping" else "tools/call round trip"
    who = "the minimal bridge" if flags.era == "minimal" else "the bridge"
    share = bridge_share(flags.era, flags.calls, flags.cache, flags.generations, flags.agents)
    print(f"{flags.era}: {share['Ir']:,.0f} instructions per {what} in {who} "
          f"({share['counted']:,.0f} counted, less {share['harness']:,.0f} for the harness)")  # fmt: skip
    if flags.cache:
        print(f"  simulated: {share['I1mr']:,.0f} instruction and {share['D1mr'] + share['D1mw']:,.0f} data "
              f"first-level cache misses, {share['Bcm'] + share['Bim']:,.0f} mispredicted branches; "
              f"about {share['cycles']:,.0f} cycles at 10 per miss or misprediction")  # fmt: skip


if __name__ == "__main__":
    main()
