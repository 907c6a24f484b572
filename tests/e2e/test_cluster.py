"""Several bridge instances sharing one NATS (docs/scaling.md): any instance serves any client ID.

A real `nats-server` on loopback and two bridges in threads; apps (`ClientMCP`) connect to
one, agents (the official `mcp` SDK, raw HTTP) to the other, and every agent-endpoint
behaviour must be the one of a single process (ClientMCP v1 §3.1, §4; docs/protocol.md,
Call outcomes). The call outcomes of one process (a result, offline, unknown tool, timeout,
disconnection, streaming after 1 s, cancellation, hanging up, in both eras) run across two
instances too, through the `topology` fixture of conftest.py (tests/e2e/test_mcp_sdk.py,
test_agent_calls.py, test_agent_legacy.py); this file holds what only a cluster has.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import psutil
import pytest
from agents import (
    DISCONNECTED,
    OFFLINE,
    WAIT,
    HeldTool,
    RawHttp,
    app_for,
    echo,
    http_client,
    legacy_body,
    legacy_headers,
    nothing_leaks,
    online_app,
    sdk_agent,
    wait_registered,
)
from conftest import SECRET, make_token
from mcp.types import TextContent
from natsserver import NatsServer
from test_observability import answer_of, call, raw_app

pytest.importorskip("nats", reason="the cluster needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]  # auto probes server/discover and ends modern


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    server = NatsServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _peers(count: int):
    return lambda s: (
        s.cluster is not None and s.cluster.directory.connected and len(s.cluster.directory.peers) == count
    )


@pytest.fixture
def cluster(nats_server, start_bridge):
    """Two bridge instances joined through `nats_server`, each having heard of the other."""

    def start(count: int = 2, **overrides: Any) -> list[Any]:
        bridges = [start_bridge(nats=(nats_server.url,), **overrides) for _ in range(count)]
        for bridge in bridges:
            bridge.wait_for(_peers(count - 1), timeout=WAIT)
        return bridges

    return start


async def sees(bridge: Any, client_id: str, tools: int | None = None, timeout: float = WAIT) -> None:
    """Wait until `bridge` knows `client_id`'s app (with that many tools)."""

    def known(s: Any) -> bool:
        app = s.bridge.apps.get(client_id)
        if app is None:
            return False
        return tools is None or (app.toolset is not None and len(app.toolset.tools) == tools)

    give_up = time.monotonic() + timeout
    while not bridge.call(known):
        if time.monotonic() > give_up:
            raise AssertionError(f"{client_id} never reached this instance")
        await asyncio.sleep(0.01)


async def gone(bridge: Any, client_id: str, timeout: float = WAIT) -> None:
    give_up = time.monotonic() + timeout
    while bridge.call(lambda s: client_id in s.bridge.apps):
        if time.monotonic() > give_up:
            raise AssertionError(f"{client_id} still held on this instance")
        await asyncio.sleep(0.01)


async def accepting(port: int, serve: subprocess.Popen) -> None:
    """Wait until `clientmcp serve` (still running) accepts connections on `port`."""
    give_up = time.monotonic() + WAIT
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        assert time.monotonic() < give_up and serve.poll() is None
        await asyncio.sleep(0.05)


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


# -- ClientMCP v1 §4.1, §4.2: listing and calling across instances ---------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_agent_on_one_instance_lists_and_calls_an_app_on_another(cluster, mode):
    """initialize/server/discover, tools/list and tools/call see the app held by the other instance."""
    a, b = cluster()
    client_id = "team.one:user@example-app_1"
    async with online_app(a, client_id, {"echo": echo}, instructions="Todo app."):
        await sees(b, client_id, tools=1)
        async with sdk_agent(b, client_id, mode) as client:
            assert client.instructions == "Todo app."
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
            results = await asyncio.gather(*(client.call_tool("echo", {"n": n}) for n in range(20)))
            assert [json.loads(text_of(r)) for r in results] == [{"n": n} for n in range(20)]
    await gone(b, client_id)
    await nothing_leaks(a)
    await nothing_leaks(b)


async def test_client_ids_do_not_reach_each_other(cluster):
    """IDs that differ only by characters NATS treats specially stay apart (ClientMCP v1 §7)."""
    a, b = cluster()
    async with online_app(a, "a.b", {"echo": echo}):
        await sees(b, "a.b", tools=1)
        for other in ("a", "a.b.c", "a_b", "a:b"):
            async with sdk_agent(b, other, "legacy") as client:
                assert (await client.list_tools()).tools == []


# -- ClientMCP v1 §4.3, docs/protocol.md, Call outcomes --------------------------------------------


async def test_legacy_notifications_cancelled_sent_to_another_instance_reaches_the_remote_app(cluster):
    """A load balancer may send the cancel to an instance where the call does not wait.

    The cancel sent to the call's own instance is tests/e2e/test_agent_calls.py's, run across
    two instances through its `topology` fixture.
    """
    a, b = cluster()
    held = HeldTool()
    async with online_app(a, "x", {"held": held}) as app:
        await sees(b, "x", tools=1)
        with (
            await RawHttp.open(b) as raw,
            await RawHttp.open(a) as other,
        ):
            headers = {**legacy_headers(b, "x"), "Accept": "application/json"}
            raw.send("POST", "/mcp", headers, legacy_body("tools/call", 1, {"name": "held"}))
            await asyncio.wait_for(held.started.wait(), WAIT)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            other.send("POST", "/mcp", legacy_headers(a, "x"), cancel)
            assert (await other.head()).status == 202
            response = await raw.head()
            assert json.loads(await raw.body(response))["error"]["code"] == -32800
            await asyncio.wait_for(held.cancelled.wait(), WAIT)
            assert app.calls_cancelled == 1
    await nothing_leaks(a)
    await nothing_leaks(b)


# -- ClientMCP v1 §4.4: list_changed on every instance ---------------------------------------------


async def test_list_changed_reaches_streams_on_the_other_instance(cluster):
    """A legacy GET stream opened on B while the app is offline hears of its tools from A."""
    a, b = cluster()
    with await RawHttp.open(b) as raw:
        raw.send(
            "GET",
            "/mcp",
            {
                "Authorization": f"Bearer {b.token('agent', 'x')}",
                "Accept": "text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
        )
        assert (await raw.head()).status == 200
        changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        async with online_app(a, "x", {"one": echo}) as app:
            assert await raw.sse_message() == changed
            app.expose("two", echo)
            await wait_registered(app)
            assert await raw.sse_message() == changed
        assert await raw.sse_message() == changed  # offline: its tools are gone


# -- ClientMCP v1 §3.1: the newest connection wins in the whole cluster -----------------------------


async def test_newer_connection_on_another_instance_replaces_the_older_with_4409(cluster):
    a, b = cluster()
    held = HeldTool()
    old = app_for(a, "x")
    old.expose("held", held)
    async with old, sdk_agent(a, "x", "legacy") as client:
        call = asyncio.ensure_future(client.call_tool("held"))
        await asyncio.wait_for(held.started.wait(), WAIT)
        async with online_app(b, "x", {"echo": echo}):
            await asyncio.wait_for(old.closed(), WAIT)
            assert old.close_code == 4409
            result = await asyncio.wait_for(call, WAIT)
            assert result.is_error and text_of(result) == DISCONNECTED
            await sees(a, "x", tools=1)
            assert json.loads(text_of(await client.call_tool("echo", {"k": 1}))) == {"k": 1}
    await nothing_leaks(a)
    await nothing_leaks(b)


async def test_replacement_race_leaves_exactly_one_connection(cluster):
    """Many connections for one ID at once on three instances: one survives everywhere, the rest get 4409."""
    bridges = cluster(3)
    apps = []
    for index in range(9):
        app = app_for(bridges[index % 3], "race")
        app.expose(f"t{index}", echo)
        apps.append(app)
    # Each connect returns registered, or raises when replaced before its register was answered.
    await asyncio.gather(*(app.connect() for app in apps), return_exceptions=True)
    give_up = time.monotonic() + WAIT
    while sum(1 for app in apps if app.close_code is None) > 1 and time.monotonic() < give_up:
        await asyncio.sleep(0.02)
    survivors = [app for app in apps if app.close_code is None]
    assert len(survivors) == 1
    assert {app.close_code for app in apps if app is not survivors[0]} == {4409}
    tool = next(iter(survivors[0].tools))
    for bridge in bridges:
        await sees(bridge, "race", tools=1)
        assert bridge.call(lambda s: list(s.bridge.apps["race"].toolset.tools)) == [tool]
    for app in apps:
        await app.close()
    for bridge in bridges:
        await nothing_leaks(bridge)


async def test_calls_during_a_replacement_race_are_each_delivered_at_most_once(cluster):
    """Agents on three instances call while connections race: every call gets one answer, no app runs one twice."""
    bridges = cluster(3)
    runs: list[tuple[int, int]] = []

    def worker(index: int):
        async def work(arguments: dict[str, Any]) -> str:
            runs.append((index, arguments["n"]))
            await asyncio.sleep(0.01)
            return f"{index}:{arguments['n']}"

        return work

    first = app_for(bridges[0], "race")
    first.expose("work", worker(0))
    await first.connect()
    for bridge in bridges:
        await sees(bridge, "race", tools=1)
    apps = [first]
    answers: dict[int, str] = {}
    allowed_errors = {DISCONNECTED, OFFLINE, "The application has not declared its tools yet."}

    async def agent(bridge: Any, start: int) -> None:
        async with http_client(bridge) as http:
            for n in range(start, start + 40):
                body = legacy_body("tools/call", n, {"name": "work", "arguments": {"n": n}})
                response = await http.post("/mcp", json=body, headers=legacy_headers(bridge, "race"))
                result = response.json()["result"]
                answers[n] = result["content"][0]["text"] if not result.get("isError") else "error"
                if result.get("isError"):
                    assert result["content"][0]["text"] in allowed_errors, result

    async def race() -> None:
        for round_ in range(3):
            await asyncio.sleep(0.05)
            newcomers = []
            for index, bridge in enumerate(bridges):
                app = app_for(bridge, "race")
                app.expose("work", worker(1 + round_ * 3 + index))
                newcomers.append(app)
            apps.extend(newcomers)
            await asyncio.gather(*(app.connect() for app in newcomers), return_exceptions=True)

    await asyncio.wait_for(
        asyncio.gather(race(), *(agent(bridge, 1000 * (i + 1)) for i, bridge in enumerate(bridges))), 60
    )
    assert len(answers) == 120  # every call answered once
    assert sum(1 for text in answers.values() if text != "error") >= 60
    delivered = [n for _, n in runs]
    assert len(delivered) == len(set(delivered))  # no call reached an app twice
    for n, text in answers.items():
        if text != "error":
            index, number = text.split(":")
            assert (int(index), int(number)) in runs and int(number) == n
    give_up = time.monotonic() + WAIT
    while sum(1 for app in apps if app.close_code is None) > 1 and time.monotonic() < give_up:
        await asyncio.sleep(0.02)
    assert sum(1 for app in apps if app.close_code is None) == 1
    for app in apps:
        await app.close()
    for bridge in bridges:
        await nothing_leaks(bridge)


# -- failures ---------------------------------------------------------------------------------------


async def test_nats_down_keeps_local_work_and_heals(cluster, nats_server):
    a, b = cluster()
    async with online_app(a, "x", {"echo": echo}):
        await sees(b, "x", tools=1)
        nats_server.stop()
        await gone(b, "x", timeout=WAIT)
        async with sdk_agent(a, "x", "legacy") as local, sdk_agent(b, "x", "legacy") as remote:
            assert json.loads(text_of(await local.call_tool("echo", {"a": 1}))) == {"a": 1}
            result = await remote.call_tool("echo")
            assert result.is_error and text_of(result) == OFFLINE
            nats_server.start()
            await sees(b, "x", tools=1, timeout=WAIT)
            assert json.loads(text_of(await remote.call_tool("echo", {"b": 2}))) == {"b": 2}


class ServeProcess:
    """`clientmcp serve --nats URL` in a subprocess on a free loopback port (killed by the test)."""

    def __init__(self, nats_url: str, stderr: Any = subprocess.DEVNULL, **extra: str) -> None:
        self.port = _free_port()
        env = {
            **os.environ,
            "CLIENTMCP_SECRET": SECRET.decode(),
            "CLIENTMCP_HOST": "127.0.0.1",
            "CLIENTMCP_PORT": str(self.port),
            "CLIENTMCP_NATS": nats_url,
            **extra,  # CLIENTMCP_NATS_CREDS, for instance
        }
        self.process = subprocess.Popen(
            # One process, so that killing it kills the instance (with --nats the default is one per core).
            [sys.executable, "-m", "clientmcp_fast", "serve", "--workers", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        give_up = time.monotonic() + WAIT
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            if time.monotonic() > give_up or self.process.poll() is not None:
                self.kill()
                raise RuntimeError("clientmcp serve did not start")
            time.sleep(0.05)

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/connect"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def token(self, role: str, client_id: str) -> str:
        return make_token(role, client_id)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(5)


async def test_sigkill_of_the_apps_instance_fails_calls_within_five_seconds(cluster, nats_server):
    """An instance killed mid-call: the agent's instance fails the call as a disconnection, in bounded time."""
    (b,) = cluster(1)
    doomed = ServeProcess(nats_server.url)
    try:
        held = HeldTool()
        async with online_app(doomed, "x", {"held": held}), sdk_agent(b, "x", "legacy") as client:
            await sees(b, "x", tools=1)
            call = asyncio.ensure_future(client.call_tool("held"))
            await asyncio.wait_for(held.started.wait(), WAIT)
            killed = time.monotonic()
            doomed.kill()
            result = await asyncio.wait_for(call, WAIT)
            took = time.monotonic() - killed
            assert result.is_error and text_of(result) == DISCONNECTED
            assert took <= 5.0, took
            await gone(b, "x")
    finally:
        doomed.kill()
    await nothing_leaks(b)


async def test_an_instance_started_before_nats_serves_alone_then_joins(start_bridge):
    """No NATS at start: the bridge serves its own apps and agents, and joins once NATS answers."""
    late = NatsServer()
    try:
        a = start_bridge(nats=(late.url,))
        b = start_bridge(nats=(late.url,))
        async with online_app(a, "x", {"echo": echo}), sdk_agent(a, "x", "legacy") as client:
            assert json.loads(text_of(await client.call_tool("echo", {"k": 1}))) == {"k": 1}
            await asyncio.to_thread(late.start)
            await sees(b, "x", tools=1)
            async with sdk_agent(b, "x", "legacy") as remote:
                assert json.loads(text_of(await remote.call_tool("echo", {"k": 2}))) == {"k": 2}
    finally:
        late.stop()


async def test_graceful_stop_of_the_apps_instance_takes_its_app_offline_at_once(cluster):
    """SIGTERM's shutdown: the app gets 1001 and the other instances hear it is gone before the heartbeat would."""
    a, b = cluster()
    app = app_for(a, "x")
    app.expose("echo", echo)
    async with app:
        await sees(b, "x", tools=1)
        stopping = asyncio.ensure_future(asyncio.to_thread(a.stop))
        await asyncio.wait_for(app.closed(), WAIT)
        assert app.close_code == 1001
        started = time.monotonic()
        await gone(b, "x")
        assert time.monotonic() - started < 2.5  # GONE, not the 3 s of a silent instance
        await stopping
    await nothing_leaks(b)


def test_nats_setting_takes_urls_and_refuses_others():
    from clientmcp_fast.config import ConfigError, load

    env = {"CLIENTMCP_SECRET": SECRET.decode(), "CLIENTMCP_NATS": "nats://u:p@127.0.0.1:4222, tls://h:4222"}
    assert load(env).nats == ("nats://u:p@127.0.0.1:4222", "tls://h:4222")
    assert load({"CLIENTMCP_SECRET": SECRET.decode()}).nats == ()
    with pytest.raises(ConfigError) as refused:
        load({**env, "CLIENTMCP_NATS": "http://user:secret@127.0.0.1:4222"})
    assert "secret" not in str(refused.value) and "CLIENTMCP_NATS" in str(refused.value)


# -- docs/scaling.md, Workers -----------------------------------------------------------------------


def test_workers_default_to_one_per_core_with_nats_and_one_without():
    from clientmcp_fast.config import load

    env = {"CLIENTMCP_SECRET": SECRET.decode()}
    cores = len(os.sched_getaffinity(0))
    assert load({**env, "CLIENTMCP_NATS": "nats://127.0.0.1:4222"}).workers == cores
    assert load({**env, "CLIENTMCP_NATS": "nats://127.0.0.1:4222", "CLIENTMCP_WORKERS": "1"}).workers == 1
    assert load(env).workers == 1


@pytest.mark.parametrize("cores", ["all", "one"])
async def test_serve_with_nats_starts_one_worker_per_core_of_its_affinity(nats_server, cores):
    """`serve --nats` without --workers: a worker per core it may run on; on one core, it serves itself."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores == "one":  # below os.cpu_count(): the affinity mask, as a container's CPU set, is what counts
        allowed = allowed[:1]
    port = _free_port()
    with serve_group(
        "--nats",
        nats_server.url,
        preexec_fn=lambda: os.sched_setaffinity(0, allowed),
        CLIENTMCP_PORT=str(port),
    ) as serve:
        await accepting(port, serve)
        workers = psutil.Process(serve.pid).children()
        # One core: the process serves itself; more: it only starts that many workers.
        assert len(workers) == (len(allowed) if len(allowed) > 1 else 0)


def _serve_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "CLIENTMCP_SECRET": SECRET.decode(), "CLIENTMCP_HOST": "127.0.0.1", **extra}


@contextlib.contextmanager
def serve_group(
    *args: str, preexec_fn: Callable[[], object] | None = None, **env: str
) -> Iterator[subprocess.Popen]:
    """`clientmcp serve ARGS` in a session of its own: it and its workers are killed at the end, however it ends."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "clientmcp_fast", "serve", *args],
        env=_serve_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
    try:
        yield serve
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait(5)


def two_workers(nats_url: str, port: int, metrics: int, **env: str) -> contextlib.AbstractContextManager:
    """`serve --workers 2 --nats URL` on `port` (`serve_group`), worker k's metrics on `metrics` + k."""
    return serve_group(
        "--workers",
        "2",
        "--nats",
        nats_url,
        CLIENTMCP_PORT=str(port),
        CLIENTMCP_METRICS=f"127.0.0.1:{metrics}",
        **env,
    )


def test_workers_above_one_without_nats_is_refused_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "clientmcp_fast", "serve", "--workers", "2"],
        env=_serve_env(CLIENTMCP_PORT=str(_free_port())),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("clientmcp: error: --workers above 1 needs --nats")


async def test_workers_share_one_port_and_reach_each_others_apps(nats_server):
    """Two workers on one port: whichever worker an agent's connection lands on, the app answers."""
    port = _free_port()
    with serve_group("--workers", "2", "--nats", nats_server.url, CLIENTMCP_PORT=str(port)) as serve:
        target = ServeProcess.__new__(ServeProcess)
        target.port = port
        await accepting(port, serve)
        async with online_app(target, "x", {"echo": echo}):
            answered = 0
            give_up = time.monotonic() + WAIT
            while answered < 12:  # each agent is a new connection: the kernel picks the worker
                async with sdk_agent(target, "x", "legacy") as client:
                    result = await client.call_tool("echo", {"n": answered})
                if not result.is_error:
                    assert json.loads(text_of(result)) == {"n": answered}
                    answered += 1
                else:  # the other worker has not heard of the app yet
                    assert text_of(result) == OFFLINE and time.monotonic() < give_up
                    await asyncio.sleep(0.1)
        workers = psutil.Process(serve.pid).children()
        assert len(workers) == 2
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.wait, 15) == 0
        assert not any(worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE for worker in workers)


def _free_ports(count: int) -> int:
    """The first of `count` consecutive free loopback ports."""
    while True:
        first = _free_port()
        if first + count - 1 > 65535:
            continue
        with contextlib.ExitStack() as held:
            try:
                for port in range(first, first + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return first


def _scrape(port: int) -> dict[str, float]:
    """The unlabelled samples of the metrics listener on `port` (name -> value)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


async def test_each_worker_serves_its_metrics_on_the_metrics_port_plus_its_index(nats_server):
    """docs/operations.md, Workers: worker k on the port + k, each counting its own apps, kept on a restart."""
    port, metrics = _free_port(), _free_ports(2)
    with two_workers(nats_server.url, port, metrics) as serve:

        async def listening(*ports: int) -> None:
            give_up = time.monotonic() + WAIT
            for each in ports:
                while True:
                    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", each), 0.2):
                        break
                    assert time.monotonic() < give_up and serve.poll() is None
                    await asyncio.sleep(0.05)

        await listening(port, metrics, metrics + 1)
        target = ServeProcess.__new__(ServeProcess)
        target.port = port
        async with contextlib.AsyncExitStack() as apps:
            online, count = [0, 0], 0
            # Each app is a new connection, which the kernel gives to either worker: connect
            # until both hold some, each counting its own.
            while min(online) == 0:
                assert count < 40
                await apps.enter_async_context(online_app(target, f"app-{count}", {"echo": echo}))
                count += 1
                scraped = [await asyncio.to_thread(_scrape, metrics + k) for k in (0, 1)]
                online = [int(each["clientmcp_apps_online"]) for each in scraped]
            assert sum(online) == count
            assert sum(int(each["clientmcp_app_connections_opened_total"]) for each in scraped) == count
        before = psutil.Process(serve.pid).children()
        before[1].kill()  # the supervisor starts another in its place, on the same metrics port
        give_up = time.monotonic() + WAIT
        while before[1].pid in {child.pid for child in psutil.Process(serve.pid).children()}:
            assert time.monotonic() < give_up
            await asyncio.sleep(0.05)
        await listening(metrics, metrics + 1)
        scraped = [await asyncio.to_thread(_scrape, metrics + k) for k in (0, 1)]
        assert sorted(int(each["clientmcp_app_connections_opened_total"]) for each in scraped)[0] == 0
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.wait, 15) == 0


# -- docs/scaling.md, Settings: what NATS cannot carry ------------------------------------------------


async def test_call_or_answer_over_the_nats_payload_fails_at_once_with_a_tool_error(cluster):
    """nats-server's default max_payload is 1 MB: a 1.5 MB call, or answer, is a tool error, not a timeout."""
    a, b = cluster()
    big = "x" * 1_500_000

    async def large(arguments: dict[str, Any]) -> str:
        return big

    async with online_app(a, "x", {"echo": echo, "large": large}), sdk_agent(b, "x", "legacy") as client:
        await sees(b, "x", tools=2)
        for name, arguments in (("echo", {"big": big}), ("large", {})):
            started = time.monotonic()
            result = await asyncio.wait_for(client.call_tool(name, arguments), WAIT)
            assert result.is_error, name
            assert text_of(result).startswith(
                "The call or its answer is too large to pass between bridge instances"
            )
            assert time.monotonic() - started < 3
        assert json.loads(text_of(await client.call_tool("echo", {"small": 1}))) == {"small": 1}
    await nothing_leaks(a)
    await nothing_leaks(b)


def test_a_turns_messages_are_split_to_fit_the_payload_limit():
    from clientmcp_fast.net.nats import NatsCluster

    class Directory:
        def __init__(self) -> None:
            self.refused: list[tuple] = []

        def undeliverable(self, subject: str, message: tuple, limit: int, now: float) -> None:
            self.refused.append(message)

    bus = NatsCluster.__new__(NatsCluster)
    bus.directory = Directory()
    messages = [(4, "x", str(n), b"r" * 300, False) for n in range(10)] + [
        (4, "x", "big", b"r" * 5000, False)
    ]
    payloads = bus._payloads("s", messages, 1000, 0.0)
    decoded = [msgspec.msgpack.decode(p) for p in payloads]
    assert all(len(p) <= 1005 for p in payloads) and len(payloads) == 4
    assert [m[2] for batch in decoded for m in batch] == [str(n) for n in range(10)]
    assert [m[2] for m in bus.directory.refused] == ["big"]


# -- docs/scaling.md, Design: the hop without nats-py's tasks -------------------------------------


async def test_the_installed_nats_py_lets_the_hop_skip_its_tasks(cluster):
    """Each instance writes its PUBs itself and is handed each message as parsed (net/nats.py).

    Fails when a nats-py release changes the internals this leans on: the bus then works
    through nats-py's public API, a loop turn slower on each side of a hop, and that is to be
    seen, not found in a bench.
    """
    from clientmcp_fast.net.nats import _direct_writer

    for bridge in cluster():
        assert bridge.call(lambda s: s.cluster.direct)
        assert bridge.call(lambda s: _direct_writer(s.cluster.nc) is not None)


def test_a_nats_py_without_the_internals_gets_the_public_way():
    """Any of the internals the hop reads missing or of another kind: no direct write, and no error."""
    from clientmcp_fast.net.nats import _direct_writer

    class Writer:
        transport = type("Transport", (), {"get_write_buffer_size": lambda self: 0})()

    def connection(**internals: Any) -> Any:
        fields = {
            "_transport": type("T", (), {"_io_writer": Writer()})(),
            "_pending": [],
            "_max_pending_size": 100,
        }
        fields.update(internals)
        return type("Connection", (), {k: v for k, v in fields.items() if v is not None})()

    assert _direct_writer(connection()) is not None  # the internals of the installed nats-py, faked
    for missing in ("_transport", "_pending", "_max_pending_size"):
        assert _direct_writer(connection(**{missing: None})) is None, missing
    assert _direct_writer(connection(_pending=())) is None
    assert _direct_writer(connection(_max_pending_size="2MB")) is None


async def test_calls_cross_instances_through_nats_py_public_api_too(cluster, monkeypatch):
    """With a nats-py whose internals differ, the bus publishes and subscribes the public way."""
    from clientmcp_fast.net import nats as bus

    monkeypatch.setattr(bus, "_direct_writer", lambda nc: None)
    monkeypatch.setattr(bus, "_HANDOVER", False)
    a, b = cluster()
    assert not b.call(lambda s: s.cluster.direct)
    async with online_app(a, "x", {"echo": echo}), sdk_agent(b, "x", "legacy") as client:
        await sees(b, "x", tools=1)
        for n in range(3):
            assert json.loads(text_of(await client.call_tool("echo", {"n": n}))) == {"n": n}
    await nothing_leaks(b)


async def test_a_backed_up_socket_hands_publishing_to_nats_py_and_order_is_kept():
    """Past nats-py's pending size in the socket's buffer, publish waits in nats-py; nothing overtakes it."""
    from clientmcp_fast.core.bus_auth import BusAuth
    from clientmcp_fast.net.nats import NatsCluster

    written: list[tuple[str, list[Any]]] = []
    reader = BusAuth((SECRET,), SECRET, "reader")

    def opened(payload: bytes) -> list[Any]:
        return msgspec.msgpack.decode(reader.open("s", payload, time.time())[0])

    class Writer:
        backlog = 0

        def __init__(self) -> None:
            self.transport = self

        def get_write_buffer_size(self) -> int:
            return self.backlog

        def writelines(self, parts: list[bytes]) -> None:
            data = b"".join(parts)
            while data:  # PUB <subject> <size>\r\n<payload>\r\n, each
                head, _, data = data.partition(b"\r\n")
                size = int(head.split()[2])
                written.append(("direct", opened(data[:size])))
                data = data[size + 2 :]

    class Connection:
        is_connected = True
        max_payload = 1 << 20
        _max_pending_size = 1000

        def __init__(self) -> None:
            self._pending: list[bytes] = []
            self._transport = type("Transport", (), {"_io_writer": Writer()})()
            self.stats = {"out_msgs": 0, "out_bytes": 0}
            self.drained = asyncio.Event()

        async def publish(self, subject: str, payload: bytes) -> None:
            await self.drained.wait()
            written.append(("nats-py", opened(payload)))

    bus = NatsCluster.__new__(NatsCluster)
    bus.loop = asyncio.get_running_loop()
    bus.nc = nc = Connection()
    bus._pending, bus._flush_due, bus._publisher = {}, False, None
    bus.auth = BusAuth((SECRET,), SECRET, "x")
    writer = nc._transport._io_writer

    async def turn() -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    bus.send("s", (1,))
    await turn()
    writer.backlog = 5000  # over nats-py's pending size: its publish must wait for the drain
    bus.send("s", (2,))
    await turn()
    writer.backlog = 0
    bus.send("s", (3,))  # the socket has room again, but (2) is not written yet
    await turn()
    assert written == [("direct", [[1]])]
    nc.drained.set()
    await turn()
    bus.send("s", (4,))
    await turn()
    assert written == [("direct", [[1]]), ("nats-py", [[2]]), ("nats-py", [[3]]), ("direct", [[4]])]
    # [[1]] and [[4]]: 3 bytes of MessagePack each, signed with 52 (core/bus_auth.py, sender "x")
    assert nc.stats == {"out_msgs": 2, "out_bytes": 110}
    nc._pending.append(b"PING\r\n")  # nats-py's own command queued: ours go after it, through it
    bus.send("s", (5,))
    await turn()
    assert written[-1] == ("nats-py", [[5]])


# -- docs/operations.md, Log events: a forwarded call's line ----------------------------------------


async def test_a_forwarded_call_has_one_line_timed_on_the_agents_instance(cluster, captured_log):
    """The agent's instance writes the line, with the time the bus gave; the app's writes none."""
    stream = captured_log("json")
    a, b = cluster(call_timeout=5.0)
    async with raw_app(a, "logged-remote"):
        await sees(b, "logged-remote", tools=4)
        assert answer_of(await call(b, "logged-remote", "late"))["result"][
            "content"
        ]  # streamed at 1 s, 1.3 s
        held = asyncio.ensure_future(call(b, "logged-remote", "hold"))
        await asyncio.sleep(0.3)  # the call is waiting for the app on a
    assert answer_of(await held)["result"]["isError"] is True  # the app left: disconnected

    def call_lines() -> list[tuple]:
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        return [
            (r["tool"], r["outcome"], r["streamed"], r["seconds"]) for r in records if r["event"] == "call"
        ]

    give_up = time.monotonic() + WAIT  # a line is written once its loop turn's work is done
    while len(call_lines()) < 2 and time.monotonic() < give_up:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # and no third line comes, from the app's instance
    calls = call_lines()
    assert [line[:3] for line in calls] == [("late", "result", True), ("hold", "disconnected", False)]
    assert 1.2 < calls[0][3] < 3.0 and 0.2 < calls[1][3] < 3.0
