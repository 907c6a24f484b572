"""Both frozen builds do what the quick start says, from their own root, with no Python on the host.

The image's folder executable and the single static file each: mint a token PyJWT
verifies, serve, answer `health`, carry an app's tool to the official `mcp` SDK in both
eras (a call streamed after one second included), join a cluster through a real
nats-server (`serve --nats`, nats-py frozen in), and end on SIGTERM with 1001 to the
app and exit 0. Each runs the compiled extensions, not their pure twins. Each also joins an
account-secured nats-server with a creds file, signing without the nkeys package, which
neither build carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import jwt
import psutil
import pytest
import websockets
from agents import MODERN, sdk_agent, websocket_app
from mcp.types import TextContent
from natsserver import NATS_SERVER, NatsServer, Operator
from test_cli import free_port
from tls import self_signed

from clientmcp_fast.core.tokens import mint

from .conftest import SECRET_TEXT, Frozen, environment, with_files

DAY = 86_400
SLOW_SECONDS = 1.6  # past the bridge's one second, so that the answer is streamed


class Served:
    """`serve` of a frozen build on a loopback port, seen as the e2e helpers see a bridge."""

    def __init__(self, frozen: Frozen, *args: str, **env: str) -> None:
        self.frozen = frozen
        self.port = free_port()
        self.env = environment(CLIENTMCP_HOST="127.0.0.1", CLIENTMCP_PORT=str(self.port), **env)
        # A session of its own: the single file's bootloaders and bridge can all be ended at once.
        self.process = subprocess.Popen(
            frozen.command("serve", *args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.http_url = f"http://127.0.0.1:{self.port}"
        self.mcp_url = f"{self.http_url}/mcp"
        self.ws_url = f"ws://127.0.0.1:{self.port}/connect"

    def token(self, role: str, client_id: str, ttl: float = 3600) -> str:
        return mint(SECRET_TEXT.encode(), role, client_id, ttl, time.time())

    def wait_listening(self) -> None:
        give_up = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: {self.process.stderr.read()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            assert time.monotonic() < give_up, "serve never listened"
            time.sleep(0.02)

    def stop(self) -> int:
        """SIGTERM, as a container runtime stops a container; the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def end(self) -> None:
        """At teardown: SIGTERM if still running, then kill whatever of its session is left."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.fixture
def served(frozen: Frozen) -> Iterator[Served]:
    bridge = Served(frozen)
    try:
        bridge.wait_listening()
        yield bridge
    finally:
        bridge.end()


def test_it_runs_the_compiled_extensions(frozen):
    result = frozen.run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("(compiled)\n"), result.stdout


def test_token_prints_a_jwt_that_pyjwt_verifies(frozen):
    result = frozen.run("token", "client", "my-app", "--ttl", "30d")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and result.stderr == ""
    claims = jwt.decode(result.stdout.strip(), SECRET_TEXT.encode(), algorithms=["HS256"])
    assert (claims["sub"], claims["role"]) == ("my-app", "client")
    assert claims["exp"] - claims["iat"] == 30 * DAY


def test_without_a_secret_it_says_so_in_one_line(frozen):
    result = subprocess.run(
        frozen.command("token", "agent", "my-app"), env={}, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith("clientmcp: error: CLIENTMCP_SECRET is not set")


def test_health_answers_0_for_the_bridge_and_1_for_a_closed_port(frozen, served):
    healthy = frozen.run("health", CLIENTMCP_PORT=str(served.port))
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout == f"ok: http://127.0.0.1:{served.port}/healthz\n"
    closed = free_port()
    unhealthy = frozen.run("health", "--url", f"http://127.0.0.1:{closed}/healthz")
    assert unhealthy.returncode == 1
    assert (
        unhealthy.stderr
        == f"clientmcp: unhealthy: nothing listens on 127.0.0.1:{closed} (connection refused)\n"
    )


def text_of(result: Any) -> str:
    assert result.is_error is not True, result
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_calls_an_apps_tools_through_it(served, mode):
    content_types: list[str] = []

    async def record(response: Any) -> None:
        if response.request.method == "POST":
            content_types.append(response.headers.get("content-type", ""))

    async with (
        websocket_app(served, "my-app", slow_seconds=SLOW_SECONDS),
        sdk_agent(served, "my-app", mode, event_hooks={"response": [record]}) as client,
    ):
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo", "slow"]
        assert text_of(await client.call_tool("echo", {"title": "Buy eggs"})) == 'echo: {"title": "Buy eggs"}'
        content_types.clear()
        started = time.monotonic()
        assert text_of(await client.call_tool("slow", {"n": 1})) == 'slow: {"n": 1}'
        assert time.monotonic() - started >= SLOW_SECONDS
        # Streamed: the bridge answered with SSE once the call outlived its first second.
        assert any(kind.startswith("text/event-stream") for kind in content_types), content_types


@pytest.mark.anyio
async def test_sigterm_closes_apps_with_1001_and_exits_0(served):
    async with websocket_app(served, "my-app") as ws:
        code = await asyncio.to_thread(served.stop)
        with contextlib.suppress(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        assert ws.close_code == 1001
    assert code == 0, served.process.stderr.read()


def test_the_image_is_one_process_and_the_single_file_leaves_none_behind(frozen, served):
    """As PID 1 the folder build starts no child (so no zombie); staticx's bootloaders all end."""
    children = psutil.Process(served.process.pid).children(recursive=True)
    if frozen.name == "image":
        assert children == []
    assert served.stop() == 0
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]


async def tools_arrive(client: Any, over: str = "") -> None:
    """Wait (20 s at most) for an agent's instance to hear of the app held by the other instance."""
    give_up = time.monotonic() + 20
    # The caller hears of the app within a NATS round trip of its joining.
    while not (await client.list_tools()).tools:
        assert time.monotonic() < give_up, "the app never reached the other instance" + over
        await asyncio.sleep(0.1)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_two_instances_joined_through_nats_carry_a_call_between_them(frozen, mode):
    """docs/scaling.md: an app on one frozen instance, the SDK agent on another, one nats-server.

    The app's instance runs with the default workers (one per core: the frozen executable
    starts itself again for each), the agent's as one process.
    """
    nats = NatsServer()
    nats.start()
    instances: list[Served] = []
    try:
        holder = Served(frozen, CLIENTMCP_NATS=nats.url)
        instances.append(holder)
        caller = Served(frozen, "--workers", "1", CLIENTMCP_NATS=nats.url)
        instances.append(caller)
        holder.wait_listening()
        caller.wait_listening()
        async with websocket_app(holder, "my-app", slow_seconds=SLOW_SECONDS):
            async with sdk_agent(caller, "my-app", mode) as client:
                await tools_arrive(client)
                assert [tool.name for tool in (await client.list_tools()).tools] == ["echo", "slow"]
                assert text_of(await client.call_tool("echo", {"n": 1})) == 'echo: {"n": 1}'
                assert text_of(await client.call_tool("slow", {"n": 2})) == 'slow: {"n": 2}'
        assert caller.stop() == 0, caller.process.stderr.read()
        assert holder.stop() == 0, holder.process.stderr.read()
    finally:
        for instance in instances:
            instance.end()
        nats.stop()


@pytest.mark.anyio
async def test_the_single_file_joins_a_tls_nats_with_the_ca_bundle_it_is_named(single, tmp_path):
    """docs/deployment.md: no CA certificates are frozen in; SSL_CERT_FILE names a bundle for `tls://`."""
    cert, key = self_signed(tmp_path)
    bundle = single.root / "ca.crt"  # the self-signed certificate is its own authority
    bundle.write_bytes(cert.read_bytes())
    bundle.chmod(0o644)
    nats = NatsServer()
    nats.process = subprocess.Popen(
        [
            NATS_SERVER,
            "-a",
            "127.0.0.1",
            "-p",
            str(nats.port),
            "--tls",
            "--tlscert",
            str(cert),
            "--tlskey",
            str(key),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    instances: list[Served] = []
    try:
        url = f"tls://127.0.0.1:{nats.port}"
        for _ in range(2):
            instances.append(Served(single, "--workers", "1", CLIENTMCP_NATS=url, SSL_CERT_FILE="/ca.crt"))
        holder, caller = instances
        holder.wait_listening()
        caller.wait_listening()
        async with websocket_app(holder, "my-app"), sdk_agent(caller, "my-app", "legacy") as client:
            await tools_arrive(client, " over TLS")
            assert text_of(await client.call_tool("echo", {"n": 1})) == 'echo: {"n": 1}'
    finally:
        for instance in instances:
            instance.end()
        nats.stop()
        bundle.unlink()


@pytest.mark.anyio
async def test_two_instances_join_an_account_secured_nats_with_creds_files(frozen):
    """docs/scaling.md, Settings: CLIENTMCP_NATS_CREDS signs in the frozen builds too (no nkeys in them).

    The nats-server runs in operator mode, knowing one account (JWTs made by the test,
    tests/e2e/natsserver.py); each instance has a user of its own, in a file only it may read.
    """
    operator = Operator()
    account = operator.account("clientmcp")
    stranger = Operator().account("elsewhere")
    nats = NatsServer(jetstream=False, config=operator.config())
    nats.start()
    files = {
        "/run/secrets/holder.creds": account.creds("holder"),
        "/run/secrets/caller.creds": account.creds("caller"),
        "/run/secrets/stranger.creds": stranger.creds("stranger"),
    }
    instances: list[Served] = []
    try:
        with with_files(frozen, files) as view:
            for name in ("holder", "caller", "stranger"):
                creds = f"/run/secrets/{name}.creds"
                instances.append(
                    Served(view, "--workers", "1", CLIENTMCP_NATS=nats.url, CLIENTMCP_NATS_CREDS=creds)
                )
            holder, caller, refused = instances
            for instance in instances:
                instance.wait_listening()
            async with websocket_app(holder, "my-app"), sdk_agent(caller, "my-app", "legacy") as client:
                await tools_arrive(client)
                assert text_of(await client.call_tool("echo", {"n": 1})) == 'echo: {"n": 1}'
                assert text_of(await client.call_tool("slow", {"n": 2})) == 'slow: {"n": 2}'
            assert caller.stop() == 0 and holder.stop() == 0
            assert refused.stop() == 0
            logs = [instance.process.stderr.read() for instance in instances]
    finally:
        for instance in instances:
            instance.end()
        nats.stop()
    assert all("nats: joined the cluster as instance" in log for log in logs[:2]), logs
    # A user of an account the server does not know: said once, and the instance served alone.
    assert (
        logs[2].count("nats: the server refused this instance's credentials ('Authorization Violation')") == 1
    )
    assert "joined the cluster" not in logs[2], logs[2]
