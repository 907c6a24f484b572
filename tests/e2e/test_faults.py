"""The fault matrix of docs/reliability.md: a real bridge against peers that die, stall, vanish or flood it.

Each test is one row (or the part of a row that no other test covers) and asserts the
exact outcome the matrix names: the tool error text, the close code and reason, the HTTP
status, the exit status, the bound. Faults that need a process of their own (SIGTERM, a
low open-file limit, RSS, 10,000 apps) run `python -m clientmcp_fast serve` as a
subprocess; the others run the in-process `RunningBridge` of tests/conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import random
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import conftest
import psutil
import pytest
import uvloop
from agents import META_SUBSCRIPTION, MODERN, envelope
from agents import RawHttp as AsyncRaw
from conftest import SECRET, make_token
from rawhttp import (
    PeerClosed,
    RawApp,
    RawHttp,
    Response,
    mcp_post,
    tool_call,
    tool_error_text,
    upgrade_request,
    wait_until,
)
from websockets.asyncio.client import connect as connect_async
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from wire import Op, client_frame, decode_server_frames

from clientmcp_fast.core.tokens import mint

ERAS = ["2025-03-26", "2025-06-18", MODERN]  # the unnamed legacy revision, a named one, the modern one
DISCONNECTED = "The application disconnected before answering."
OFFLINE = "The application is not connected: its tools are unavailable until it reconnects."
BUSY = "The application is busy; try again."
SHUTTING_DOWN = "The bridge is shutting down."
ECHO_TOOL = {"name": "echo", "inputSchema": {"type": "object"}}
REGISTER = json.dumps({"type": "register", "tools": [ECHO_TOOL]})
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
MiB = 1024 * 1024
TESTS = Path(__file__).resolve().parent.parent


# -- requests, answers, apps -------------------------------------------------------------------


def call_request(
    era: str,
    token: str,
    request_id: int,
    arguments: dict | None = None,
    *,
    sse: bool = False,
    name: str = "echo",
) -> bytes:
    """A tools/call as an agent of `era` sends it; `sse` names text/event-stream in Accept."""
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    accept = "application/json, text/event-stream" if sse else "application/json"
    headers = [f"Authorization: Bearer {token}", "Content-Type: application/json", f"Accept: {accept}"]
    if era == MODERN:
        params["_meta"] = envelope()
        headers += [f"MCP-Protocol-Version: {MODERN}", "Mcp-Method: tools/call", f"Mcp-Name: {name}"]
    elif era != "2025-03-26":  # 2025-03-26 is the revision of a request that names none
        headers.append(f"MCP-Protocol-Version: {era}")
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()
    head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{line}\r\n" for line in headers)
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


def stream_request(kind: str, token: str, request_id: int = 1) -> bytes:
    """A legacy GET notification stream, or a modern `subscriptions/listen` for tool changes."""
    if kind == "legacy GET":
        return (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        ).encode()
    params = {"notifications": {"toolsListChanged": True}, "_meta": envelope()}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}
    ).encode()
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: subscriptions/listen\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def sse_messages(body: bytes) -> list[Any]:
    """The JSON of every `message` event of an SSE body (comments skipped)."""
    messages = []
    for block in body.decode().replace("\r\n", "\n").split("\n\n"):
        if block.startswith("event: message\n"):
            (data,) = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
            messages.append(json.loads(data))
    return messages


def read_stream_head(conn: RawHttp) -> Response:
    """The head of an answer that must have become an SSE stream (chunked, text/event-stream)."""
    head = conn.read_response(head_request=True)
    assert head.status == 200, head
    assert head.header("content-type") == "text/event-stream", head.headers
    assert head.header("transfer-encoding") == "chunked", head.headers
    return head


def tool_error_in(message: dict, era: str, request_id: int) -> str:
    """The text of the tool error (isError) in JSON-RPC `message`, checked for `era`'s result shape."""
    assert message["id"] == request_id, message
    result = message["result"]
    assert result["isError"] is True, result
    if era == MODERN:
        assert result["resultType"] == "complete", result
    else:
        assert "resultType" not in result, result
    (block,) = result["content"]
    return block["text"]


def registered_app(bridge, client_id: str, **kwargs) -> RawApp:
    """A raw-socket app online as `client_id` with the one tool `echo`; it reads only when told."""
    app = RawApp(bridge.port, bridge.token("client", client_id), **kwargs)
    app.send_text(REGISTER)
    assert json.loads(app.read_text()) == {"type": "registered"}
    return app


def answer(app: RawApp, text: str = "done") -> dict:
    """Read the next call `app` receives and answer it with one text block; the call."""
    call = json.loads(app.read_text())
    assert call["type"] == "call", call
    result = {"content": [{"type": "text", "text": text}]}
    app.send_text(json.dumps({"type": "result", "id": call["id"], "result": result}))
    return call


class EchoApp:
    """A `websockets` app in a thread answering every call with `echo: <arguments>` (or `result_text`, or never)."""

    def __init__(self, bridge, client_id: str, result_text: str | None = None, answers: bool = True) -> None:
        self.ws: ClientConnection = connect(
            bridge.ws_url,
            subprotocols=["clientmcp.v1", bridge.token("client", client_id)],
            open_timeout=10,
            max_size=None,
            ping_interval=None,
            legacy=True,
        )
        self.ws.send(REGISTER)
        assert json.loads(self.ws.recv(timeout=10)) == {"type": "registered"}
        self.result_text = result_text
        self.answers = answers
        self.calls = 0
        self.cancels: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            for message in self.ws:
                data = json.loads(message)
                if data["type"] == "cancel":
                    self.cancels.append(data["id"])
                if data["type"] != "call":
                    continue
                self.calls += 1
                if not self.answers:
                    continue
                text = self.result_text or f"echo: {json.dumps(data['arguments'], sort_keys=True)}"
                result = {"content": [{"type": "text", "text": text}]}
                self.ws.send(json.dumps({"type": "result", "id": data["id"], "result": result}))

    def close(self) -> None:
        self.ws.close()
        self._thread.join(10)


def echo_round_trips(bridge, client_id: str, count: int) -> list[float]:
    """`count` calls of `echo` on one keep-alive connection, each checked; their latencies in seconds."""
    latencies = []
    token = bridge.token("agent", client_id)
    with RawHttp(bridge.port) as conn:
        for number in range(count):
            started = time.monotonic()
            conn.send(mcp_post(tool_call("echo", {"n": number}, number), token))
            response = conn.read_response()
            latencies.append(time.monotonic() - started)
            assert response.status == 200, response
            text = response.json()["result"]["content"][0]["text"]
            assert text == f'echo: {{"n": {number}}}', text[:200]
    return latencies


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed (EOF or reset) `sock`, without waiting and without reading data."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), as the kernel does for a process that dies with unread data."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.fixture
def bridge_log() -> Iterator[list[logging.LogRecord]]:
    """Every record the in-process bridge logs (its own logger, and asyncio's for loop errors)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    loggers = [logging.getLogger("clientmcp"), logging.getLogger("asyncio")]
    levels = [one.level for one in loggers]
    for one in loggers:
        one.addHandler(handler)
        one.setLevel(logging.DEBUG)
    yield records
    for one, level in zip(loggers, levels):
        one.removeHandler(handler)
        one.setLevel(level)


def assert_no_crash_logged(records: list[logging.LogRecord]) -> None:
    """Nothing at error level and no traceback: a peer's fault is an event, not a crash."""
    bad = [
        f"{r.name} {r.levelname} {r.getMessage()}"
        for r in records
        if r.levelno >= logging.ERROR or r.exc_info
    ]
    assert not bad, bad


# -- a bridge of its own: `python -m clientmcp_fast serve` ---------------------------------------


class BridgeProcess:
    """A bridge subprocess on a free port of 127.0.0.1, its log in a file; the test's twin (pure or compiled)."""

    def __init__(self, log_path: Path, *flags: str, nofile: int | None = None, log: str = "info") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLIENTMCP_")}
        if os.environ.get("CLIENTMCP_NO_EXTENSIONS"):
            env["CLIENTMCP_NO_EXTENSIONS"] = os.environ["CLIENTMCP_NO_EXTENSIONS"]
        env["CLIENTMCP_SECRET"] = SECRET.decode()
        self.log_path = log_path
        self._log = open(log_path, "w")  # a file, not a pipe: 10,000 log lines must never block it

        def limit_files() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with socket.socket() as probe:  # a free port (the log, at warn, does not say which one was bound)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "clientmcp_fast", "serve", "--host", "127.0.0.1", "--port", str(self.port)]
            + ["--log", log, *flags],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            preexec_fn=limit_files if nofile else None,
        )
        self.ps = psutil.Process(self.process.pid)

        def listening() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"the bridge exited with {self.process.returncode}: {self.log()}")
            try:
                return healthz(self.port) == 200
            except (ConnectionRefusedError, PeerClosed):
                return False

        try:
            wait_until(listening, timeout=20, what="the bridge listening")
        except BaseException:
            self.kill()  # not yet the fixture's to kill
            raise

    def log(self) -> str:
        return self.log_path.read_text()

    def token(self, role: str, client_id: str) -> str:
        return make_token(role, client_id)

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/connect"

    def rss(self) -> int:
        return self.ps.memory_info().rss

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return times.user + times.system

    def terminate(self) -> tuple[int, float]:
        """SIGTERM; the exit status and the seconds until the process ended."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(30)
        return code, time.monotonic() - sent

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


@pytest.fixture
def bridge_process(tmp_path: Path) -> Iterator:
    """A factory: `bridge_process("--app-idle-timeout", "5", nofile=96)`; every one killed at teardown."""
    started: list[BridgeProcess] = []

    def start(*flags: str, **options: Any) -> BridgeProcess:
        bridge = BridgeProcess(tmp_path / f"bridge-{len(started)}.log", *flags, **options)
        started.append(bridge)
        return bridge

    yield start
    for bridge in started:
        bridge.kill()


def healthz(port: int) -> int:
    """The status of GET /healthz on a new connection."""
    with RawHttp(port, timeout=10) as conn:
        conn.send(HEALTHZ)
        return conn.read_response().status


# -- 1. The app killed mid-call ------------------------------------------------------------------

# An app in a process of its own: it registers, then prints every frame it reads, so that
# when it is killed the kernel closes its socket with a FIN and no close frame (nothing unread).
KILLED_APP = """
import json, sys
from rawhttp import RawApp
app = RawApp(int(sys.argv[1]), sys.argv[2])
app.send_text(json.dumps({"type": "register", "tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))
while True:
    print(app.read_text(), flush=True)
"""


@pytest.mark.parametrize("how", ["SIGKILL", "TCP reset"])
def test_an_app_killed_mid_call_fails_its_calls_at_once_in_every_era(start_bridge, how):
    """Every call of a dead app, JSON or streamed, any era, gets the disconnection error at once; others go on."""
    bridge = start_bridge(call_timeout=60)
    bystander = registered_app(bridge, "bystander")
    if how == "SIGKILL":
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS / "e2e")])}
        process = subprocess.Popen(
            [sys.executable, "-c", KILLED_APP, str(bridge.port), bridge.token("client", "victim")],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert json.loads(process.stdout.readline()) == {"type": "registered"}
    else:
        victim = registered_app(bridge, "victim")
    agent = bridge.token("agent", "victim")
    calls = [(era, sse) for era in ERAS for sse in (False, True)]
    conns = [RawHttp(bridge.port) for _ in calls]
    try:
        for request_id, ((era, sse), conn) in enumerate(zip(calls, conns)):
            conn.send(call_request(era, agent, request_id, {"n": request_id}, sse=sse))
        with RawHttp(bridge.port) as other:
            other.send(call_request("2025-06-18", bridge.token("agent", "bystander"), 99))
            other_call = json.loads(bystander.read_text())
            if how == "SIGKILL":
                delivered = [json.loads(process.stdout.readline()) for _ in calls]
            else:
                delivered = [json.loads(victim.read_text()) for _ in calls]
            assert sorted(call["arguments"]["n"] for call in delivered) == list(range(len(calls)))
            # A call still running after 1 s streams to an agent that accepts SSE: wait for that.
            heads = {i: read_stream_head(conn) for i, ((_, sse), conn) in enumerate(zip(calls, conns)) if sse}
            assert len(heads) == 3
            killed = time.monotonic()
            if how == "SIGKILL":
                process.kill()
                process.wait(10)
            else:
                reset(victim.sock)
            for request_id, ((era, sse), conn) in enumerate(zip(calls, conns)):
                if sse:
                    (message,) = sse_messages(conn._read_chunked())
                else:
                    response = conn.read_response()
                    assert response.header("content-type") == "application/json"
                    message = response.json()
                assert tool_error_in(message, era, request_id) == DISCONNECTED
            took = time.monotonic() - killed
            assert took < 2.0, took  # the call timeout is 60 s: nothing waited for it
            # The other app's call in flight was untouched and completes now.
            result = {"content": [{"type": "text", "text": "still here"}]}
            bystander.send_text(json.dumps({"type": "result", "id": other_call["id"], "result": result}))
            assert other.read_response().json() == {"jsonrpc": "2.0", "id": 99, "result": result}
        for era in ERAS:
            with RawHttp(bridge.port) as late:
                late.send(call_request(era, agent, 7))
                assert tool_error_in(late.read_response().json(), era, 7) == OFFLINE
        with RawHttp(bridge.port) as again:
            again.send(mcp_post(tool_call("echo", {}, 8), bridge.token("agent", "bystander")))
            answer(bystander, "served")
            assert again.read_response().json()["result"]["content"][0]["text"] == "served"
    finally:
        for conn in conns:
            conn.close()
        if how == "SIGKILL" and process.poll() is None:
            process.kill()
    bystander.close()
    bridge.assert_nothing_leaks()


# -- 2. The agent gone mid-stream ----------------------------------------------------------------


def test_agents_gone_mid_stream_get_their_calls_cancelled_and_nothing_is_logged_as_a_crash(
    start_bridge, bridge_log
):
    """Agents hanging up (FIN or reset) on calls turned SSE: `cancel` {id} to the app, tables empty, no error."""
    bridge = start_bridge(call_timeout=60)
    app = registered_app(bridge, "held")
    agent = bridge.token("agent", "held")
    hangups = [(era, how) for era in ERAS for how in ("close", "reset")]
    conns = [RawHttp(bridge.port) for _ in hangups]
    for request_id, ((era, _), conn) in enumerate(zip(hangups, conns)):
        conn.send(call_request(era, agent, request_id, {"n": request_id}, sse=True))
    in_flight = {json.loads(app.read_text())["id"] for _ in hangups}
    assert bridge.call(lambda s: set(s.bridge.apps["held"].calls)) == in_flight
    for conn in conns:
        read_stream_head(conn)
        conn.read_until(b": keep-alive\n\n")  # the stream is live: its first keep-alive came
    gone = time.monotonic()
    for (_, how), conn in zip(hangups, conns):
        if how == "reset":
            reset(conn.sock)
        else:
            conn.close()
    cancels = [json.loads(app.read_text()) for _ in hangups]
    assert time.monotonic() - gone < 2.0
    assert all(set(cancel) == {"type", "id"} and cancel["type"] == "cancel" for cancel in cancels), cancels
    assert {cancel["id"] for cancel in cancels} == in_flight
    bridge.wait_for(lambda s: len(s.bridge.calls) == 0 and not s.bridge.apps["held"].calls)
    # A result that comes after the cancel is ignored; the app serves the next call as ever.
    for call_id in in_flight:
        app.send_text(json.dumps({"type": "result", "id": call_id, "result": {"content": []}}))
    with RawHttp(bridge.port) as conn:
        conn.send(call_request(MODERN, agent, 50))
        answer(app, "after")
        assert conn.read_response().json()["result"]["content"][0]["text"] == "after"
    app.close()
    bridge.assert_nothing_leaks()
    assert_no_crash_logged(bridge_log)


@pytest.mark.parametrize("kind", ["legacy GET", "modern listen"])
def test_an_agent_gone_from_its_notification_stream_frees_its_place(start_bridge, bridge_log, kind):
    """With one stream allowed per client ID, a second is 429 until the first agent hangs up; then 200."""
    bridge = start_bridge(max_streams_per_client=1)
    token = bridge.token("agent", "watched")
    first = RawHttp(bridge.port)
    first.send(stream_request(kind, token))
    read_stream_head(first)
    with RawHttp(bridge.port) as refused:
        refused.send(stream_request(kind, token, 2))
        assert refused.read_response().status == 429
    reset(first.sock)
    bridge.wait_for(lambda s: s.bridge.stream_count == 0)
    with RawHttp(bridge.port) as again:
        again.send(stream_request(kind, token, 3))
        read_stream_head(again)
        # The new stream is the one that hears of a change.
        app = registered_app(bridge, "watched")
        again.read_until(b"notifications/tools/list_changed")
        app.close()
    bridge.assert_nothing_leaks()
    assert_no_crash_logged(bridge_log)


# -- 3. Slow readers ---------------------------------------------------------------------------------


def _shrink_send_buffer(client_id: str):
    def shrink(server) -> None:
        # The kernel would otherwise absorb megabytes; with its buffer small, the bridge's own
        # write buffer for this app fills, which is what the limits measure.
        (protocol,) = [p for p in server.websockets if getattr(p.session, "client_id", None) == client_id]
        protocol.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)

    return shrink


def test_apps_that_never_read_meet_their_write_limits_while_other_apps_are_served(start_bridge):
    """One app held above app_soft_bytes (busy, then 4429), one pushed past app_hard_bytes (4429 at once)."""
    bridge = start_bridge(app_soft_bytes=256 * 1024, app_hard_bytes=MiB, app_soft_seconds=2.0)
    healthy = EchoApp(bridge, "healthy")
    soft = registered_app(bridge, "soft", rcvbuf=4096)
    hard = registered_app(bridge, "hard", rcvbuf=4096)
    bridge.call(_shrink_send_buffer("soft"))
    bridge.call(_shrink_send_buffer("hard"))
    soft_agent = bridge.token("agent", "soft")
    delivered: list[RawHttp] = []
    try:
        while not bridge.call(lambda s: s.bridge.apps["soft"].congested_since is not None):
            assert len(delivered) < 40, "the app's unsent data never passed the soft limit"
            conn = RawHttp(bridge.port)
            conn.send(mcp_post(tool_call("echo", {"pad": "z" * (100 * 1024)}, len(delivered)), soft_agent))
            delivered.append(conn)
            sent = len(delivered)
            bridge.wait_for(lambda s, sent=sent: len(s.bridge.apps["soft"].calls) == sent)
        congested = time.monotonic()
        with RawHttp(bridge.port) as refused:
            refused.send(mcp_post(tool_call("echo", {}, "late"), soft_agent))
            assert tool_error_text(refused.read_response(), "late") == BUSY
        with RawHttp(bridge.port) as over:
            over.send(mcp_post(tool_call("echo", {"pad": "z" * (2 * MiB)}, 1), bridge.token("agent", "hard")))
            assert tool_error_text(over.read_response()) == DISCONNECTED
        assert hard.read_close() == (4429, "the app does not read: unsent data passed the hard limit")
        # Meanwhile, and until the soft limit's time runs out, the healthy app is served promptly.
        latencies = echo_round_trips(bridge, "healthy", 30)
        assert max(latencies) < 1.0, latencies
        bridge.wait_for(lambda s: "soft" not in s.bridge.apps, timeout=10)
        assert time.monotonic() - congested >= 1.5
        assert soft.read_close() == (
            4429,
            "the app does not read: unsent data above the soft limit for 2 s",
        )
        for request_id, conn in enumerate(delivered):
            assert tool_error_text(conn.read_response(), request_id) == DISCONNECTED
        assert max(echo_round_trips(bridge, "healthy", 10)) < 1.0
    finally:
        for conn in delivered:
            conn.close()
        soft.close()
        hard.close()
        healthy.close()
    bridge.assert_nothing_leaks()


def test_agents_that_never_read_large_answers_do_not_hold_up_other_agents(start_bridge):
    """Four agents pipelining calls with 1 MiB answers and reading none: another agent is served as ever."""
    bridge = start_bridge()
    big = EchoApp(bridge, "big", result_text="x" * MiB)
    healthy = EchoApp(bridge, "healthy")
    token = bridge.token("agent", "big")
    unread = []
    for _ in range(4):
        agent = socket.socket()
        agent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        agent.connect(("127.0.0.1", bridge.port))
        agent.sendall(b"".join(mcp_post(tool_call("echo", {}, number), token) for number in range(8)))
        unread.append(agent)
    try:
        time.sleep(1.0)  # time enough to answer all 32, were nothing held back
        latencies = echo_round_trips(bridge, "healthy", 30)
        assert max(latencies) < 1.0, latencies
        assert healthz(bridge.port) == 200
        held = bridge.call(lambda s: [c.transport.get_write_buffer_size() for c in s.http_connections])
        assert max(held) <= 3 * MiB, held  # about one answer each (tests/e2e/test_unread_answers.py)
        assert big.calls <= 4 * 3, big.calls
    finally:
        for agent in unread:
            reset(agent)
    bridge.wait_for(lambda s: len(s.bridge.calls) == 0 and not s.http_connections)
    big.close()
    healthy.close()
    bridge.assert_nothing_leaks()


# -- 4. Half-open connections --------------------------------------------------------------------


def test_an_app_whose_peer_vanished_is_closed_4408_at_the_idle_timeout(start_bridge):
    """No FIN, no reads, no writes: 4408 after app_idle_timeout, its call fails then, the socket goes 3 s later."""
    bridge = start_bridge(app_idle_timeout=0.5, call_timeout=60)
    ghost = registered_app(bridge, "ghost")  # from here on this socket is neither read, written nor closed
    silent_since = time.monotonic()
    with RawHttp(bridge.port) as conn:
        conn.send(call_request("2025-06-18", bridge.token("agent", "ghost"), 1))
        assert tool_error_in(conn.read_response().json(), "2025-06-18", 1) == DISCONNECTED
    failed_after = time.monotonic() - silent_since
    assert 0.4 <= failed_after < 2.0, failed_after
    bridge.wait_for(lambda s: s.bridge.app_connections == 0, timeout=10)
    released_after = time.monotonic() - silent_since
    # The bridge waited for a close frame that never came, then aborted (CLOSE_WAIT_SECONDS).
    assert 3.0 <= released_after < 6.0, released_after
    assert ghost.read_close() == (4408, "nothing received for 0.5 s")  # the call, then the close frame
    ghost.assert_closed()
    ghost.close()
    bridge.assert_nothing_leaks()


HALF_OPEN = {
    "half a head": (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le", "head_timeout"),
    "half a body": (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n" + b'{"jsonrpc":"2.0",',
        "keepalive_timeout",
    ),
    "idle keep-alive": (HEALTHZ, "keepalive_timeout"),
}


@pytest.mark.parametrize("case", list(HALF_OPEN))
def test_a_half_open_http_connection_is_closed_by_the_timeout_of_its_phase(start_bridge, case):
    """Half a head: closed at head_timeout; half a body or idle after an answer: at keepalive_timeout."""
    timeouts = {"head_timeout": 0.6, "keepalive_timeout": 1.8}
    bridge = start_bridge(**timeouts)
    data, which = HALF_OPEN[case]
    with RawHttp(bridge.port) as conn, RawHttp(bridge.port) as busy:
        conn.send(data)
        started = time.monotonic()
        if case == "idle keep-alive":
            assert conn.read_response().status == 200
        # Another agent keeps talking all along, and is never timed out.
        while not closed_by_peer(conn.sock):
            assert time.monotonic() - started < 5, "the half-open connection was never closed"
            busy.send(HEALTHZ)
            assert busy.read_response().status == 200
            time.sleep(0.05)
        took = time.monotonic() - started
        conn.assert_closed()  # and without a word: no answer to half a request
        expected = timeouts[which]
        assert expected - 0.1 <= took <= expected + 0.6, (which, took)


# -- 5. SIGTERM under load -------------------------------------------------------------------------


async def _holding_app(bridge: BridgeProcess, client_id: str):
    """A `websockets` app that registers and never answers (it does answer the closing handshake)."""
    ws = await connect_async(
        bridge.ws_url, subprotocols=["clientmcp.v1", bridge.token("client", client_id)], ping_interval=None
    )
    await ws.send(REGISTER)
    assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"type": "registered"}
    return ws


async def _close_of(ws) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as caught:
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    assert caught.value.rcvd is not None, "closed without a close frame"
    return caught.value.rcvd.code, caught.value.rcvd.reason


async def _mute_app(
    bridge: BridgeProcess, client_id: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw app that registers, then never writes again: it will not answer the bridge's close frame."""
    reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
    writer.write(upgrade_request(["clientmcp.v1", bridge.token("client", client_id)]))
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    writer.write(client_frame(Op.TEXT, REGISTER.encode()))
    assert await reader.readexactly(23) == b"\x81\x15" + b'{"type":"registered"}'
    return reader, writer


async def _sigterm_under_load(bridge: BridgeProcess) -> float:
    held, streamed = await _holding_app(bridge, "held"), await _holding_app(bridge, "streamed")
    mute_reader, mute_writer = await _mute_app(bridge, "mute")
    json_calls, sse_calls = [], []
    for number, era in enumerate(ERAS):
        raw = await AsyncRaw.open(bridge)
        raw.writer.write(call_request(era, bridge.token("agent", "held"), number))
        json_calls.append((era, number, raw))
        raw = await AsyncRaw.open(bridge)
        raw.writer.write(call_request(era, bridge.token("agent", "streamed"), 10 + number, sse=True))
        sse_calls.append((era, 10 + number, raw))
    raw = await AsyncRaw.open(bridge)
    raw.writer.write(call_request("2025-06-18", bridge.token("agent", "mute"), 20))
    json_calls.append(("2025-06-18", 20, raw))
    legacy_streams, listen_streams = [], []
    for number in range(2):
        raw = await AsyncRaw.open(bridge)
        raw.writer.write(stream_request("legacy GET", bridge.token("agent", "held")))
        assert (await raw.head()).status == 200
        legacy_streams.append(raw)
        raw = await AsyncRaw.open(bridge)
        raw.writer.write(stream_request("modern listen", bridge.token("agent", "streamed"), 30 + number))
        assert (await raw.head()).status == 200
        assert (await raw.sse_message())["method"] == "notifications/subscriptions/acknowledged"
        listen_streams.append((30 + number, raw))
    idle = await AsyncRaw.open(bridge)
    idle.writer.write(HEALTHZ)
    assert (await idle.head()).status == 200
    assert await idle.reader.readexactly(2) == b"ok"
    half = await AsyncRaw.open(bridge)
    half.writer.write(b"GET /healthz HTTP/1.1\r\nHo")
    for _, _, raw in sse_calls:  # every streamed call has turned into a stream (after 1 s)
        head = await raw.head()
        assert head.headers["content-type"] == "text/event-stream"
        assert await raw.sse_item() == ("comment", "keep-alive")

    stopping = asyncio.ensure_future(asyncio.to_thread(bridge.terminate))
    for era, number, raw in json_calls:
        head = await raw.head()
        assert (head.status, head.headers["connection"]) == (200, "close")
        assert tool_error_in(json.loads(await raw.body(head)), era, number) == SHUTTING_DOWN
        assert await raw.at_eof()
    for era, number, raw in sse_calls:
        assert tool_error_in(await raw.sse_message(), era, number) == SHUTTING_DOWN
        assert await raw.sse_item() is None
        assert await raw.at_eof()
    for number, raw in listen_streams:
        final = {"resultType": "complete", "_meta": {META_SUBSCRIPTION: number}}
        assert await raw.sse_message() == {"jsonrpc": "2.0", "id": number, "result": final}
        assert await raw.sse_item() is None
        assert await raw.at_eof()
    for raw in legacy_streams:
        assert await raw.sse_item() is None  # the legacy stream just ends
        assert await raw.at_eof()
    assert await _close_of(held) == (1001, "bridge shutting down")
    assert await _close_of(streamed) == (1001, "bridge shutting down")
    assert await idle.at_eof()
    code, took = await stopping
    assert code == 0
    assert took < 5.0, took  # docs/protocol.md, Shutdown
    assert await half.at_eof()  # held to the end of the grace, then aborted
    try:
        rest = await asyncio.wait_for(mute_reader.read(), 10)
    except ConnectionResetError:
        rest = b""  # the abort reset it before the last bytes were read
    frames = decode_server_frames(rest)
    assert frames[-1][1] == Op.CLOSE, frames
    close = frames[-1][2]
    assert (int.from_bytes(close[:2], "big"), close[2:]) == (1001, b"bridge shutting down")
    for raw in (*(r for *_, r in json_calls + sse_calls), *legacy_streams, *(r for _, r in listen_streams)):
        raw.close()
    idle.close()
    half.close()
    mute_writer.close()
    return took


def test_sigterm_under_load_answers_every_call_ends_every_stream_and_exits_0_within_5_s(bridge_process):
    """Calls in flight (both eras, JSON and SSE), streams, idle and half-sent connections, and a mute app."""
    bridge = bridge_process()
    took = asyncio.run(_sigterm_under_load(bridge))
    log = bridge.log()
    assert "info shutting down" in log and log.rstrip().endswith("info stopped"), log
    assert "Traceback" not in log and " error " not in log, log
    with pytest.raises(ConnectionRefusedError):
        RawHttp(bridge.port)
    print(f"\nSIGTERM under load: exit 0 after {took:.2f} s")


# -- 6. Descriptor exhaustion ------------------------------------------------------------------


def test_out_of_descriptors_the_bridge_neither_spins_nor_crashes_and_serves_again(bridge_process):
    """RLIMIT_NOFILE 96: connections past it are closed at once, CPU stays idle, one warning, then service."""
    limit = 96
    bridge = bridge_process(
        "--head-timeout", "60", "--keepalive-timeout", "60", "--app-idle-timeout", "60", nofile=limit
    )
    app = registered_app(bridge, "held")
    agent = RawHttp(bridge.port)  # connected before the flood: it must be served all along
    agent_token = bridge.token("agent", "held")
    flood = [socket.create_connection(("127.0.0.1", bridge.port)) for _ in range(limit + 50)]
    try:
        wait_until(lambda: bridge.ps.num_fds() >= limit, what="the bridge's descriptors exhausted")
        wait_until(lambda: sum(map(closed_by_peer, flood)) >= 50, what="connections past the limit closed")
        held = [conn for conn in flood if not closed_by_peer(conn)]
        assert held, "no flood connection was taken before the limit"
        # Exhausted, the bridge is idle: each new connection is closed at once, with no busy loop.
        cpu_before = bridge.cpu_seconds()
        window = time.monotonic()
        while time.monotonic() - window < 1.0:
            with socket.create_connection(("127.0.0.1", bridge.port)) as extra:
                wait_until(
                    lambda extra=extra: closed_by_peer(extra), timeout=2, what="a new connection closed"
                )
            time.sleep(0.05)
        cpu = bridge.cpu_seconds() - cpu_before
        assert cpu < 0.2, f"{cpu:.2f} s of CPU in a second of exhaustion"
        assert bridge.process.poll() is None
        agent.send(mcp_post(tool_call("echo", {}, 1), agent_token))
        answer(app, "served while exhausted")
        assert agent.read_response().json()["result"]["content"][0]["text"] == "served while exhausted"
    finally:
        for conn in flood:
            conn.close()
    wait_until(lambda: bridge.ps.num_fds() < limit - 20, what="the flood's descriptors released")
    assert healthz(bridge.port) == 200
    late = registered_app(bridge, "late")
    wait_until(lambda: "open files available again" in bridge.log(), what="the recovery logged")
    log = bridge.log().splitlines()
    assert [line.split(" ", 1)[1] for line in log if "open" in line] == [
        f"warn open-file limit reached ({limit}): new connections are closed at once until some end",
        "info open files available again: new connections are served",
    ], log
    assert len(log) < 10 and not any("Traceback" in line or " error " in line for line in log), log
    print(
        f"\nexhausted at {limit} descriptors: {len(flood) - len(held)} of {len(flood)} connections closed at once,"
        f" {cpu * 1000:.0f} ms of CPU in 1 s; log: {len(log)} lines"
    )
    late.close()
    app.close()
    agent.close()
    assert bridge.terminate()[0] == 0


# -- 7. Memory under a cap ---------------------------------------------------------------------------


def _unread(port: int, request: bytes, read_head: bool = True) -> socket.socket:
    """A connection with a 4 KiB receive window that sends `request` and then reads nothing (but the head)."""
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect(("127.0.0.1", port))
    conn.sendall(request)
    if read_head:
        conn.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(1)
        assert head.startswith(b"HTTP/1.1 200"), head
    return conn


def _register_burst(app: RawApp, count: int) -> None:
    """`count` registers alternating two tool sets (each one a change to announce), all answered."""
    frames = [
        client_frame(
            Op.TEXT, json.dumps({"type": "register", "tools": [{**ECHO_TOOL, "name": f"t{n % 2}"}]}).encode()
        )
        for n in range(count)
    ]
    app.send(b"".join(frames))
    for _ in range(count):
        assert json.loads(app.read_text()) == {"type": "registered"}


MEMORY_BOUND = 320 * MiB  # over the idle bridge's RSS, with every bound of the memory tests reached at once
HEAP_HELD = 12 * MiB  # the least the bridge's own heap holds at a quarter of that load (the load is real)
HEAP_RETURN = 2 * MiB  # over the idle bridge's heap once the peers have gone


class _Fleet:
    """The apps of the memory tests: one answering 1 MiB, one holding every call, watched ones, one not reading."""

    def __init__(self, bridge) -> None:
        self.big = EchoApp(bridge, "big", result_text="x" * MiB)
        self.holder = EchoApp(bridge, "holder", answers=False)
        self.warm = EchoApp(bridge, "warm")
        self.watched = [registered_app(bridge, f"m{n}") for n in range(4)]
        self.soft = registered_app(bridge, "soft", rcvbuf=4096)

    def close(self) -> None:
        for app in (*self.watched, self.soft):
            app.close()
        for echo in (self.big, self.holder, self.warm):
            echo.close()


def _every_bound_at_once(
    bridge, measure: Callable[[], int], released: Callable[[], bool], share: int = 1
) -> tuple[int, int, str]:
    """Reach every bound at once (1/`share` of the peers), `measure`, let them go until `released`.

    Returns what `measure` said at the peak and after, and how many calls the app not reading took.
    """
    fleet = _Fleet(bridge)
    echo_round_trips(bridge, "warm", 20)
    peers: list[socket.socket] = []
    busy_after = None
    try:
        # 256 notification streams nobody reads (64 per client ID, the per-client cap), through bursts.
        for n in range(4):
            for number in range(32 // share):
                token = bridge.token("agent", f"m{n}")
                peers.append(_unread(bridge.port, stream_request("legacy GET", token)))
                peers.append(_unread(bridge.port, stream_request("modern listen", token, number)))
        for app in fleet.watched:
            _register_burst(app, 2_000 // share**2)
        # 16 agents with 16 pipelined calls each, answered with 1 MiB, never read.
        token = bridge.token("agent", "big")
        pipelined = b"".join(mcp_post(tool_call("echo", {}, number), token) for number in range(16))
        peers += [_unread(bridge.port, pipelined, read_head=False) for _ in range(16 // share)]
        # 8 agents with a call held by the app and 16 more of 256 KiB queued behind it.
        token = bridge.token("agent", "holder")
        queued = b"".join(mcp_post(tool_call("echo", {"pad": "q" * 256 * 1024}, n), token) for n in range(17))
        peers += [_unread(bridge.port, queued, read_head=False) for _ in range(8 // share)]
        # An app that never reads, fed 512 KiB calls until the bridge says busy (over 4 MiB unsent).
        token = bridge.token("agent", "soft")
        for number in range(64):
            conn = RawHttp(bridge.port)
            conn.send(mcp_post(tool_call("echo", {"pad": "s" * 512 * 1024}, number), token))
            peers.append(conn.sock)
            conn.sock.settimeout(0.05)  # "busy" comes at once; a call that was sent gets no answer
            try:
                if tool_error_text(conn.read_response(), number) == BUSY:
                    busy_after = number
                    break
            except TimeoutError:
                pass  # sent to the app: no answer
        # 500 connections each with 8 KiB of a head, never finished.
        peers += [
            _unread(bridge.port, b"GET /healthz HTTP/1.1\r\nX: " + b"h" * 8192, False)
            for _ in range(500 // share)
        ]
        time.sleep(1.5)
        wait_until(lambda: fleet.big.calls >= 16 // share, what="the unread agents' first calls answered")
        peak = measure()
        assert busy_after is not None, "the app that never reads was never over its soft limit"
        assert fleet.holder.calls == 8 // share, fleet.holder.calls
        assert healthz(bridge.port) == 200
        assert max(echo_round_trips(bridge, "warm", 10)) < 2.0
    finally:
        for conn in peers:
            reset(conn)
        fleet.close()
    wait_until(released, timeout=15, what="every peer released")
    time.sleep(1.0)
    return peak, measure(), f"busy after {busy_after} calls of 512 KiB"


MEMORY_FLAGS = {"app_soft_bytes": 4 * MiB, "head_timeout": 120, "keepalive_timeout": 120, "call_timeout": 120}


def test_memory_with_every_bound_reached_at_once_stays_under_its_bound(bridge_process):
    """Unread streams and answers, an app over its soft limit, queued bodies, half heads: the RSS they cost."""
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in MEMORY_FLAGS.items()]
    bridge = bridge_process(*flags, "--app-idle-timeout=120", log="warn")
    with contextlib.closing(EchoApp(bridge, "warm")):
        echo_round_trips(bridge, "warm", 20)  # the code paths warm
    baseline = bridge.rss()
    peak, after, what = _every_bound_at_once(bridge, bridge.rss, lambda: bridge.ps.num_fds() < 20)
    print(
        f"\nmemory (RSS): idle {baseline / MiB:.1f} MiB; every bound at once {peak / MiB:.1f} MiB"
        f" (+{(peak - baseline) / MiB:.1f}); peers gone {after / MiB:.1f} MiB (+{(after - baseline) / MiB:.1f}); {what}"
    )
    assert peak - baseline < MEMORY_BOUND, (baseline, peak)
    assert after <= peak + 8 * MiB, (peak, after)  # nothing more is taken once the peers have gone
    assert bridge.terminate()[0] == 0


def test_what_the_bridge_holds_at_every_bound_returns_to_baseline_once_the_peers_leave(start_bridge):
    """A quarter of that load in process, the heap traced: the bridge holds MiBs at the peak, nothing after."""
    bridge = start_bridge(**MEMORY_FLAGS, app_idle_timeout=120)
    # Everything allocated while the bridge's loop runs, whatever the depth: the bridge's own heap.
    loop_line = next(
        number
        for number, line in enumerate(Path(conftest.__file__).read_text().splitlines(), 1)
        if line.strip() == "loop.run_forever()"
    )
    in_bridge = [tracemalloc.Filter(True, conftest.__file__, loop_line, all_frames=True)]

    def heap() -> int:
        gc.collect()
        return sum(
            stat.size for stat in tracemalloc.take_snapshot().filter_traces(in_bridge).statistics("filename")
        )

    def released() -> bool:
        return bridge.call(
            lambda s: (
                not s.http_connections
                and not s.websockets
                and not s.bridge.calls
                and not s.bridge.stream_count
            )
        )

    tracemalloc.start(25)
    try:
        with contextlib.closing(EchoApp(bridge, "warm")):
            echo_round_trips(bridge, "warm", 20)
        bridge.wait_for(lambda s: not s.websockets)
        baseline = heap()
        peak, after, what = _every_bound_at_once(bridge, heap, released, share=4)
    finally:
        tracemalloc.stop()
    print(
        f"\nmemory (the bridge's heap, traced): idle {baseline / MiB:.2f} MiB; every bound at once"
        f" {peak / MiB:.1f} MiB; peers gone {after / MiB:.2f} MiB; {what}"
    )
    assert peak - baseline > HEAP_HELD, (baseline, peak)
    assert after - baseline < HEAP_RETURN, (baseline, after)


# -- 8. 10,000 apps and 64 agents --------------------------------------------------------------------

APPS = int(os.environ.get("CLIENTMCP_FAULT_APPS", "10000"))
AGENTS = 64
CALLS_PER_AGENT = 200
_REGISTERED_FRAME = b"\x81\x15" + b'{"type":"registered"}'
_MASK_KEY = b"\x5a\x13\xc4\x07"


def _masked(payload: bytes) -> bytes:
    """A masked client text frame (RFC 6455 §5.3), XORed as one big integer: cheap enough for 10,000 apps."""
    length = len(payload)
    key = int.from_bytes((_MASK_KEY * (length // 4 + 1))[:length], "big")
    body = (int.from_bytes(payload, "big") ^ key).to_bytes(length, "big")
    if length < 126:
        head = bytes((0x81, 0x80 | length))
    elif length < 0x10000:
        head = bytes((0x81, 0x80 | 126)) + struct.pack("!H", length)
    else:
        head = bytes((0x81, 0x80 | 127)) + struct.pack("!Q", length)
    return head + _MASK_KEY + body


_REGISTER_FRAME = _masked(REGISTER.encode())


class LightApp(asyncio.Protocol):
    """One app of thousands: upgrade, register, answer each call with `<client id>:<n>`, echo the close."""

    def __init__(self, client_id: str, token: str, port: int, registered: asyncio.Future) -> None:
        self.client_id = client_id
        self.request = upgrade_request(["clientmcp.v1", token])
        self.registered = registered
        self.buffer = b""
        self.upgraded = False
        self.calls = 0
        self.close_code: int | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            assert self.buffer.startswith(b"HTTP/1.1 101"), self.buffer[:100]
            self.upgraded = True
            self.buffer = self.buffer[end + 4 :]
            self.transport.write(_REGISTER_FRAME)
        while len(self.buffer) >= 2:
            first, second = self.buffer[0], self.buffer[1]
            length, start = second & 0x7F, 2
            if length == 126:
                if len(self.buffer) < 4:
                    return
                length, start = struct.unpack("!H", self.buffer[2:4])[0], 4
            elif length == 127:
                if len(self.buffer) < 10:
                    return
                length, start = struct.unpack("!Q", self.buffer[2:10])[0], 10
            if len(self.buffer) < start + length:
                return
            payload = self.buffer[start : start + length]
            self.buffer = self.buffer[start + length :]
            self._frame(first & 0x0F, payload)

    def _frame(self, opcode: int, payload: bytes) -> None:
        if opcode == Op.CLOSE:
            self.close_code = int.from_bytes(payload[:2], "big")
            self.transport.write(client_frame(Op.CLOSE, payload[:2]))
            self.transport.close()
        elif payload == _REGISTERED_FRAME[2:]:
            self.registered.set_result(None)
        else:
            call = json.loads(payload)
            if call["type"] == "call":
                self.calls += 1
                text = f"{self.client_id}:{call['arguments']['n']}"
                result = {
                    "type": "result",
                    "id": call["id"],
                    "result": {"content": [{"type": "text", "text": text}]},
                }
                self.transport.write(_masked(json.dumps(result).encode()))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.registered.done():
            self.registered.set_exception(ConnectionError("closed before registered"))


async def _connect_apps(port: int, count: int) -> list[LightApp]:
    """`count` registered apps, `app-00000`..., opened 500 at a time (the listen backlog is 4096)."""
    loop = asyncio.get_running_loop()
    now = time.time()
    apps: list[LightApp] = []
    for first in range(0, count, 500):
        batch = []
        for n in range(first, min(count, first + 500)):
            client_id = f"app-{n:05d}"
            batch.append(
                LightApp(client_id, mint(SECRET, "client", client_id, 3600, now), port, loop.create_future())
            )
        await asyncio.gather(*(loop.create_connection(lambda a=a: a, "127.0.0.1", port) for a in batch))
        await asyncio.wait_for(asyncio.gather(*(a.registered for a in batch)), 60)
        apps += batch
    return apps


async def _agent(port: int, apps: list[LightApp], tokens: dict[str, str], rng: random.Random) -> list[float]:
    """One agent on one keep-alive connection: calls to random apps, each answer checked; the latencies."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    latencies = []
    for number in range(CALLS_PER_AGENT):
        app = rng.choice(apps)
        token = tokens.get(app.client_id) or tokens.setdefault(
            app.client_id, mint(SECRET, "agent", app.client_id, 3600, time.time())
        )
        nonce = rng.randrange(1 << 30)
        started = time.monotonic()
        writer.write(mcp_post(tool_call("echo", {"n": nonce}, number), token))
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        body = json.loads(await reader.readexactly(length))
        latencies.append(time.monotonic() - started)
        assert body["id"] == number and body["result"]["content"][0]["text"] == f"{app.client_id}:{nonce}", (
            body
        )
    writer.close()
    return latencies


async def _many(bridge: BridgeProcess) -> dict[str, float]:
    figures = {"idle_rss": bridge.rss() / MiB}
    started = time.monotonic()
    apps = await _connect_apps(bridge.port, APPS)
    figures["connect_s"] = time.monotonic() - started
    figures["apps_rss"] = bridge.rss() / MiB
    tokens: dict[str, str] = {}
    rng = random.Random(17)
    started = time.monotonic()
    cpu_before = bridge.cpu_seconds()
    results = await asyncio.gather(
        *(_agent(bridge.port, apps, tokens, random.Random(rng.random())) for _ in range(AGENTS))
    )
    figures["calls_s"] = time.monotonic() - started
    figures["calls_cpu_s"] = bridge.cpu_seconds() - cpu_before
    latencies = sorted(latency for result in results for latency in result)
    assert len(latencies) == AGENTS * CALLS_PER_AGENT
    assert sum(app.calls for app in apps) == len(latencies)
    figures["p50_ms"] = latencies[len(latencies) // 2] * 1000
    figures["p99_ms"] = latencies[int(len(latencies) * 0.99)] * 1000
    figures["calls_rss"] = bridge.rss() / MiB
    # SIGTERM with every app still connected: each gets 1001, and the bridge exits 0 within 5 s.
    code, took = await asyncio.to_thread(bridge.terminate)
    figures["sigterm_s"] = took
    assert code == 0
    assert took < 5.0, took
    await asyncio.sleep(0.2)
    codes = {app.close_code for app in apps}
    assert codes == {1001}, codes
    return figures


def test_10000_apps_and_64_agents_calling_random_apps_are_all_answered_correctly(bridge_process):
    """10,000 registered apps (CLIENTMCP_FAULT_APPS), 64 agents x 200 calls to random ones: each answer right."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < APPS + AGENTS + 100:
        pytest.fail(f"RLIMIT_NOFILE's hard limit {hard} is below {APPS + AGENTS + 100}: raise it to run this")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the bridge inherits it too
    try:
        bridge = bridge_process(log="warn")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            figures = runner.run(_many(bridge))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(
        f"\n{APPS} apps connected and registered in {figures['connect_s']:.1f} s;"
        f" {AGENTS * CALLS_PER_AGENT} calls by {AGENTS} agents in {figures['calls_s']:.2f} s"
        f" (p50 {figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, bridge CPU {figures['calls_cpu_s']:.2f} s);"
        f" bridge RSS idle {figures['idle_rss']:.1f} MiB, with the apps {figures['apps_rss']:.1f} MiB,"
        f" after the calls {figures['calls_rss']:.1f} MiB; SIGTERM: exit 0 in {figures['sigterm_s']:.2f} s"
    )
