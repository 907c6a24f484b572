"""Revocation in a cluster: token generations in a NATS JetStream bucket (docs/configuration.md, Revocation).

A real `nats-server` with JetStream, bridge instances with `--state nats` sharing it, the real
`clientmcp revoke` and `clientmcp token` in subprocesses, `websockets` apps and the official
`mcp` SDK as agent (ClientMCP v1 §2): a revoke closes the app with 4401 on whichever instance
holds it and makes the old agent tokens 401 on every instance (and every worker of `serve
--workers`), within a second; a restarted instance still refuses revoked tokens; NATS
unavailable at start stops `serve`; NATS lost and back, an instance catches up with the raises
it missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
import time
import urllib.request
from typing import Any

import psutil
import pytest
import test_cluster
import test_revocation
from agents import WAIT
from conftest import make_token
from test_cluster import (
    NatsServer,
    ServeProcess,
    _free_port,
    _free_ports,
    accepting,
    sees,
    two_workers,
)
from test_revocation import (
    PROMPTLY,
    assert_one_line_error,
    becomes_401,
    clientmcp,
    closed_within,
    connect_app,
    refused_app,
    status_of,
    tool_names,
)

from clientmcp_fast.core.generations import REVOKED_REASON

pytest.importorskip("nats", reason="--state nats needs nats-py (pip install 'clientmcp-fast[nats]')")

pytestmark = pytest.mark.anyio

# test_cluster.py's fixtures: a nats-server (with JetStream), and instances joined through it.
nats_server = test_cluster.nats_server
cluster = test_cluster.cluster

STATE = "nats"
# NATS back: an instance catches up within its reconnect wait (0.5 s) and a read of the bucket;
# nats-py's ordered consumer alone would take its missed heartbeats, 10 s.
CAUGHT_UP = 3.0
WHERE = "NATS bucket clientmcp_generations"


async def cli(nats_url: str, *args: str) -> Any:
    """The real `clientmcp` command with `--state nats` and the NATS URL in the environment."""
    return await clientmcp(STATE, *args, CLIENTMCP_NATS=nats_url)  # type: ignore[arg-type]


async def revoke(nats_url: str, role: str, client_id: str) -> int:
    """`clientmcp revoke` on the cluster's bucket."""
    return await test_revocation.revoke(STATE, role, client_id, CLIENTMCP_NATS=nats_url)


async def token(nats_url: str, role: str, client_id: str) -> tuple[str, int]:
    """A token from `clientmcp token`, minted with the bucket's generation."""
    return await test_revocation.token(STATE, role, client_id, WHERE, CLIENTMCP_NATS=nats_url)


async def eventually(bridge: Any, predicate: Any, timeout: float = WAIT) -> None:
    """Wait, without blocking this loop, until `predicate(server)` holds on the bridge's loop."""
    give_up = time.monotonic() + timeout
    while not bridge.call(predicate):
        assert time.monotonic() < give_up, f"bridge state never satisfied {predicate}"
        await asyncio.sleep(0.01)


def follower_connected(server: Any) -> bool:
    return server.generations.connection.connected


# -- ClientMCP v1 §2 across instances ------------------------------------------------------------------


async def test_revoking_a_client_closes_its_app_on_the_other_instance_within_a_second(cluster, nats_server):
    a, b = cluster(2, state=STATE)
    app_token, generation = await token(nats_server.url, "client", "alice")
    assert generation == 0
    agent_token = a.token("agent", "alice")  # no gen claim: generation 0
    ws = await connect_app(a, app_token)
    await sees(b, "alice", tools=1)
    assert await tool_names(b, agent_token) == ["echo"]

    assert await revoke(nats_server.url, "client", "alice") == 1
    code, reason, took = await closed_within(ws, PROMPTLY)
    assert (code, reason) == (4401, REVOKED_REASON)
    assert took < PROMPTLY
    refusal = (4401, "token revoked: gen 0, the current generation is 1")
    assert await refused_app(a, app_token) == refusal
    assert await refused_app(b, app_token) == refusal

    new_token, generation = await token(nats_server.url, "client", "alice")
    assert generation == 1
    ws = await connect_app(b, new_token)
    await sees(a, "alice", tools=1)
    assert await tool_names(a, agent_token) == ["echo"]  # agent tokens are not revoked
    await ws.close()


async def test_revoking_an_agent_makes_its_old_token_401_on_every_instance_at_once(cluster, nats_server):
    a, b = cluster(2, state=STATE)
    app_token, _ = await token(nats_server.url, "client", "bob")
    ws = await connect_app(a, app_token)
    await sees(b, "bob", tools=1)
    old_token, generation = await token(nats_server.url, "agent", "bob")
    assert generation == 0
    for bridge in (a, b):
        assert await status_of(bridge, old_token) == (200, "ok")  # now in each verifier's cache

    assert await revoke(nats_server.url, "agent", "bob") == 1
    took = await asyncio.gather(becomes_401(a, old_token, PROMPTLY), becomes_401(b, old_token, PROMPTLY))
    assert max(took) < PROMPTLY
    for bridge in (a, b):
        assert await status_of(bridge, old_token) == (
            401,
            "Unauthorized: token revoked: gen 0, the current generation is 1",
        )

    new_token, generation = await token(nats_server.url, "agent", "bob")
    assert generation == 1
    assert await tool_names(a, new_token) == ["echo"]
    assert await tool_names(b, new_token) == ["echo"]
    assert ws.close_code is None  # an agent revocation closes no app
    await ws.close()


async def test_a_restarted_instance_and_nats_still_refuse_revoked_tokens(nats_server, start_bridge):
    """The bucket is kept on the NATS server's disk: an instance started later reads it."""
    bridge = start_bridge(nats=(nats_server.url,), state=STATE)
    old_app, _ = await token(nats_server.url, "client", "carol")
    old_agent, _ = await token(nats_server.url, "agent", "carol")
    assert await revoke(nats_server.url, "client", "carol") == 1
    assert await revoke(nats_server.url, "agent", "carol") == 1
    assert await revoke(nats_server.url, "agent", "carol") == 2
    await asyncio.to_thread(bridge.stop)
    await asyncio.to_thread(nats_server.stop)
    await asyncio.to_thread(nats_server.start)

    bridge = start_bridge(nats=(nats_server.url,), state=STATE)
    assert (await refused_app(bridge, old_app))[0] == 4401
    assert (await status_of(bridge, old_agent))[0] == 401
    new_app, app_generation = await token(nats_server.url, "client", "carol")
    new_agent, agent_generation = await token(nats_server.url, "agent", "carol")
    assert (app_generation, agent_generation) == (1, 2)
    ws = await connect_app(bridge, new_app)
    assert await tool_names(bridge, new_agent) == ["echo"]
    await ws.close()


async def test_token_and_revoke_take_the_store_and_nats_as_flags(nats_server):
    result = await clientmcp("", "revoke", "client", "flag", "--state", "nats", "--nats", nats_server.url)  # type: ignore[arg-type]
    assert (result.returncode, result.stdout) == (0, "1\n"), result.stderr
    result = await clientmcp("", "token", "agent", "flag", "--state", "nats", "--nats", nats_server.url)  # type: ignore[arg-type]
    assert result.returncode == 0 and f"agent generation 0 of flag (from {WHERE})" in result.stderr
    assert await revoke(nats_server.url, "client", "flag") == 2


# -- docs/scaling.md, Workers: one host's workers share the bucket ----------------------------------


def worker_samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A worker's metrics (docs/operations.md, Workers): (name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def on_every_worker(
    metrics: int, counted: tuple[str, tuple[tuple[str, str], ...]], attempt: Any, timeout: float = WAIT
) -> None:
    """Repeat `attempt()` (each a new connection, which the kernel gives to either worker) until both counted one."""
    before = [(await asyncio.to_thread(worker_samples, metrics + k)).get(counted, 0) for k in (0, 1)]
    give_up = time.monotonic() + timeout
    while True:
        await attempt()
        now = [(await asyncio.to_thread(worker_samples, metrics + k)).get(counted, 0) for k in (0, 1)]
        if min(after - first for after, first in zip(now, before, strict=True)) > 0:
            return
        assert time.monotonic() < give_up, (
            f"the kernel did not give both workers a connection: {before} -> {now}"
        )


async def test_a_revoke_counts_on_every_worker_of_serve_workers_with_state_nats(nats_server):
    """`serve --workers 2 --state nats`: each worker follows the bucket; the revoked tokens are refused on both."""
    port, metrics = _free_port(), _free_ports(2)
    with two_workers(nats_server.url, port, metrics, CLIENTMCP_STATE=STATE) as serve:
        for each in (port, metrics, metrics + 1):  # both workers up, each having read the bucket
            await accepting(each, serve)
        target = ServeProcess.__new__(ServeProcess)
        target.port = port
        old_agent = make_token("agent", "app-0")  # no gen claim: generation 0
        apps: dict[str, Any] = {}
        online = [0, 0]
        while min(online) == 0:  # each app a new connection: until both workers hold some
            assert len(apps) < 40
            client_id = f"app-{len(apps)}"
            apps[client_id] = await connect_app(target, make_token("client", client_id))
            samples = [await asyncio.to_thread(worker_samples, metrics + k) for k in (0, 1)]
            online = [int(each[("clientmcp_apps_online", ())]) for each in samples]

        async def accepted() -> None:
            assert await status_of(target, old_agent) == (200, "ok")

        ok = ("clientmcp_http_responses_total", (("status", "200"),))
        await on_every_worker(metrics, ok, accepted)  # in each worker's verifier cache now

        for client_id, ws in apps.items():  # on either worker: closed with 4401 where it is
            assert await revoke(nats_server.url, "client", client_id) == 1
            code, reason, took = await closed_within(ws, PROMPTLY)
            assert (code, reason) == (4401, REVOKED_REASON), client_id
        assert await revoke(nats_server.url, "agent", "app-0") == 1
        revoked = time.monotonic()

        async def refused() -> None:
            answer = await status_of(target, old_agent)
            if answer != (200, "ok") or time.monotonic() - revoked > PROMPTLY:
                assert answer == (401, "Unauthorized: token revoked: gen 0, the current generation is 1")

        unauthorized = ("clientmcp_http_responses_total", (("status", "401"),))
        await on_every_worker(metrics, unauthorized, refused)

        async def app_refused() -> None:
            refusal = (4401, "token revoked: gen 0, the current generation is 1")
            assert await refused_app(target, make_token("client", "app-0")) == refusal

        await on_every_worker(
            metrics, ("clientmcp_app_connections_closed_total", (("code", "4401"),)), app_refused
        )
        new_agent, generation = await token(nats_server.url, "agent", "app-0")
        assert generation == 1

        async def new_accepted() -> None:
            assert await status_of(target, new_agent) == (200, "ok")

        await on_every_worker(metrics, ok, new_accepted)

        # A worker started again by the first process reads the bucket before it serves.
        workers = psutil.Process(serve.pid).children()
        workers[1].kill()
        give_up = time.monotonic() + WAIT
        while workers[1].pid in {child.pid for child in psutil.Process(serve.pid).children()}:
            assert time.monotonic() < give_up
            await asyncio.sleep(0.05)
        for each in (metrics, metrics + 1):
            await accepting(each, serve)

        async def still_refused() -> None:
            assert (await status_of(target, old_agent))[0] == 401

        await on_every_worker(metrics, unauthorized, still_refused)
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(serve.wait, 15) == 0


# -- failures ------------------------------------------------------------------------------------------


async def test_serve_and_revoke_refuse_nats_without_jetstream_or_unreachable():
    """A store unavailable at start: exit 2 with one line, before listening (docs/configuration.md, Exit status)."""
    plain = NatsServer(jetstream=False)
    await asyncio.to_thread(plain.start)
    try:
        for command in (
            ("serve", "--port", "0"),
            ("serve", "--port", "0", "--workers", "1"),
            ("serve", "--port", "0", "--workers", "2"),  # the first process checks, before any worker
            ("revoke", "client", "x"),
            ("token", "client", "x"),
        ):
            result = await cli(plain.url, *command)
            assert (
                f"NATS at {plain.url} has no JetStream: start nats-server with -js"
                in assert_one_line_error(result)
            )
    finally:
        plain.stop()
    nobody = f"nats://user:password@127.0.0.1:{_free_port()}"
    for command in (("serve", "--port", "0"), ("revoke", "agent", "x")):
        error = assert_one_line_error(await cli(nobody, *command))
        assert f"cannot connect to NATS at nats://127.0.0.1:{nobody.rsplit(':', 1)[1]}: " in error
        assert "password" not in error
    error = assert_one_line_error(await clientmcp(STATE, "serve", "--port", "0"))  # type: ignore[arg-type]
    assert "--state nats keeps token generations in the cluster's NATS: it needs --nats" in error
    error = assert_one_line_error(await clientmcp(STATE, "revoke", "client", "x"))  # type: ignore[arg-type]
    assert "--state nats needs the NATS servers: set CLIENTMCP_NATS or --nats" in error


class CuttableProxy:
    """A TCP relay to a NATS server, in a thread: it can cut every connection and refuse new ones, then open again."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = _free_port()
        self.loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)
        self._thread.start()
        self.open()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _run(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(10)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            self._writers |= {writer, up_writer}
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _open(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_address=True)

    async def _cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            transport = writer.transport
            transport.abort()  # type: ignore[attr-defined]
        self._writers.clear()

    def open(self) -> None:
        self._run(self._open())

    def cut(self) -> None:
        self._run(self._cut())

    async def _close(self) -> None:
        with contextlib.suppress(Exception):
            await self._cut()
        relays = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)

    def close(self) -> None:
        self._run(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


async def test_an_instance_cut_from_nats_keeps_its_generations_and_catches_up_when_back(
    nats_server, start_bridge
):
    """Raises made while an instance cannot reach NATS count there once it is back: the bucket is read again."""
    proxy = CuttableProxy(nats_server.port)
    try:
        bridge = start_bridge(nats=(proxy.url,), state=STATE)
        app_token, _ = await token(nats_server.url, "client", "dan")
        old_agent, _ = await token(nats_server.url, "agent", "dan")
        ws = await connect_app(bridge, app_token)
        assert await status_of(bridge, old_agent) == (200, "ok")

        await asyncio.to_thread(proxy.cut)
        await eventually(bridge, lambda s: not follower_connected(s))
        # Revoked through NATS itself, which the instance cannot reach: the last generations it
        # read stay in force meanwhile.
        assert await revoke(nats_server.url, "client", "dan") == 1
        assert await revoke(nats_server.url, "agent", "dan") == 1
        await asyncio.sleep(0.3)
        assert ws.close_code is None
        assert await status_of(bridge, old_agent) == (200, "ok")

        await asyncio.to_thread(proxy.open)
        code, reason, took = await closed_within(ws, WAIT)
        assert (code, reason) == (4401, REVOKED_REASON)
        assert took < CAUGHT_UP
        assert (await status_of(bridge, old_agent))[0] == 401
        new_app, _ = await token(nats_server.url, "client", "dan")
        new_agent, generation = await token(nats_server.url, "agent", "dan")
        assert generation == 1
        ws = await connect_app(bridge, new_app)
        assert await tool_names(bridge, new_agent) == ["echo"]
        # The watch goes on after the re-read: the next raise counts within a second again.
        assert await revoke(nats_server.url, "agent", "dan") == 2
        assert await becomes_401(bridge, new_agent, PROMPTLY) < PROMPTLY
        await ws.close()
    finally:
        await asyncio.to_thread(proxy.close)


async def test_nats_restarted_the_instance_catches_up_with_raises_made_since(nats_server, start_bridge):
    """nats-server stopped: `revoke` fails in one line; started again: a revoke counts on the instance."""
    bridge = start_bridge(nats=(nats_server.url,), state=STATE)
    app_token, _ = await token(nats_server.url, "client", "eve")
    old_agent, _ = await token(nats_server.url, "agent", "eve")
    ws = await connect_app(bridge, app_token)

    await asyncio.to_thread(nats_server.stop)
    await eventually(bridge, lambda s: not follower_connected(s))
    error = assert_one_line_error(await cli(nats_server.url, "revoke", "client", "eve"))
    assert "cannot connect to NATS" in error
    assert await status_of(bridge, old_agent) == (200, "ok")  # the last generations read

    await asyncio.to_thread(nats_server.start)
    # At once, before or after the instance reconnects: either way it must count there.
    assert await revoke(nats_server.url, "client", "eve") == 1
    assert await revoke(nats_server.url, "agent", "eve") == 1
    code, reason, took = await closed_within(ws, WAIT)
    assert (code, reason) == (4401, REVOKED_REASON)
    assert took < CAUGHT_UP
    await becomes_401(bridge, old_agent, WAIT)
    await eventually(bridge, follower_connected)
    new_agent, _ = await token(nats_server.url, "agent", "eve")
    assert await revoke(nats_server.url, "agent", "eve") == 2
    assert await becomes_401(bridge, new_agent, PROMPTLY) < PROMPTLY


def test_the_proxy_of_these_tests_cuts_and_restores():
    """The relay really refuses while cut (else the catch-up test would prove nothing)."""
    server = NatsServer()
    server.start()
    proxy = CuttableProxy(server.port)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), 2) as sock:
            assert sock.recv(4).startswith(b"INFO")
        proxy.cut()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", proxy.port), 2)
        proxy.open()
        with socket.create_connection(("127.0.0.1", proxy.port), 2) as sock:
            assert sock.recv(4).startswith(b"INFO")
    finally:
        proxy.close()
        server.stop()


# -- the bucket as the command line uses it ------------------------------------------------------------


def test_the_bucket_store_counts_concurrent_revokes_and_tells_its_changes(nats_server):
    """Two writers at once both count (compare-and-set on the key's revision); `changed` sees the other's."""
    from clientmcp_fast.net.nats_state import NatsBucketStore, NatsStateError, generation_key

    stores = [NatsBucketStore((nats_server.url,)) for _ in range(3)]
    watcher, first, second = stores
    try:
        assert watcher.rows() == [] and not watcher.changed()
        raised: list[int] = []
        threads = [
            threading.Thread(
                target=lambda s=s: raised.extend(s.raise_generation("client", "a.b") for _ in range(15))
            )
            for s in (first, second)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(raised) == list(range(1, 31))
        assert watcher.current("client", "a.b") == 30 and watcher.current("agent", "a.b") == 0
        assert watcher.changed() and not watcher.changed()
        assert first.raise_generation("agent", "a") == 1
        assert watcher.changed()
        assert sorted(watcher.rows()) == [("agent", "a", 1), ("client", "a.b", 30)]
        # What no bridge writes is read as nothing, and a key holding no generation stops a revoke.
        first._run(first._kv.put("robot.61", b"1"))
        first._run(first._kv.put(generation_key("agent", "x"), b"-1"))
        assert sorted(watcher.rows()) == [("agent", "a", 1), ("client", "a.b", 30)]
        with pytest.raises(
            NatsStateError, match=r"key agent\.78 of bucket clientmcp_generations holds b'-1'"
        ):
            watcher.raise_generation("agent", "x")
        first._run(first._kv.delete(generation_key("client", "a.b")))
        assert watcher.current("client", "a.b") == 0  # deleted: its old tokens are back
        assert first.raise_generation("client", "a.b") == 1
    finally:
        for store in stores:
            store.close()
