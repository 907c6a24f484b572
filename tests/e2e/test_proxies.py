"""The TLS proxies of docs/deployment.md (Caddy and nginx), run with deploy/'s files in front of a bridge.

Each file is used as shipped but for what a test must change: the site's address and
certificate (a self-signed one for 127.0.0.1) and the bridge's port. Through each proxy: an
app connects over wss and registers, the official `mcp` SDK calls it over https in both
eras, a call outliving one second arrives as SSE whose keep-alives come as they are
written (a buffering proxy would hold them to the end), and list_changed reaches a
notification stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from agents import MODERN, WAIT, legacy_body, sdk_agent, websocket_app
from mcp.types import TextContent
from test_cli import free_port
from tls import self_signed

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SLOW_SECONDS = 3.5  # three keep-alives, a second apart, before the answer

pytestmark = pytest.mark.anyio


def replaced(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced by `new`; fails if the shipped file no longer holds `old`."""
    assert text.count(old) == 1, f"deploy/ no longer holds {old!r}"
    return text.replace(old, new)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key."""
    return self_signed(tmp_path_factory.mktemp("tls"))


def nginx(bridge_port: int, port: int, cert: Path, key: Path, folder: Path) -> list[str]:
    """deploy/nginx.conf inside a minimal main configuration; the command that runs it."""
    site = (DEPLOY / "nginx.conf").read_text()
    site = replaced(site, "server 127.0.0.1:8080;", f"server 127.0.0.1:{bridge_port};")
    site = replaced(site, "listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;")
    site = replaced(site, "/etc/ssl/bridge.example.com/fullchain.pem", str(cert))
    site = replaced(site, "/etc/ssl/bridge.example.com/privkey.pem", str(key))
    (folder / "site.conf").write_text(site)
    temp = "".join(
        f"{kind}_temp_path {folder}/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (folder / "nginx.conf").write_text(
        f"daemon off;\nmaster_process off;\npid {folder}/nginx.pid;\nerror_log stderr warn;\n"
        f"events {{}}\nhttp {{\naccess_log off;\n{temp}include {folder}/site.conf;\n}}\n"
    )
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    return [nginx, "-e", "stderr", "-p", str(folder), "-c", str(folder / "nginx.conf")]


def caddy(bridge_port: int, port: int, cert: Path, key: Path, folder: Path) -> list[str]:
    """deploy/Caddyfile with its site on 127.0.0.1 and a given certificate; the command that runs it."""
    site = (DEPLOY / "Caddyfile").read_text()
    site = replaced(site, "bridge.example.com {", f"https://127.0.0.1:{port} {{\n\ttls {cert} {key}")
    site = replaced(site, "reverse_proxy 127.0.0.1:8080 {", f"reverse_proxy 127.0.0.1:{bridge_port} {{")
    # No admin endpoint, no ACME and no port 80 for redirects: nothing but the site.
    (folder / "Caddyfile").write_text("{\n\tadmin off\n\tauto_https off\n}\n" + site)
    return ["caddy", "run", "--adapter", "caddyfile", "--config", str(folder / "Caddyfile")]


PROXIES = {"nginx": nginx, "caddy": caddy}


class Proxied:
    """The bridge as an agent and an app see it through the proxy: https and wss on `port`."""

    def __init__(self, bridge: Any, port: int, cert: Path) -> None:
        self.bridge = bridge
        self.mcp_url = f"https://127.0.0.1:{port}/mcp"
        self.ws_url = f"wss://127.0.0.1:{port}/connect"
        self.tls = ssl.create_default_context(cafile=str(cert))

    def token(self, role: str, client_id: str) -> str:
        return self.bridge.token(role, client_id)


@pytest.fixture(params=sorted(PROXIES))
def proxied(request: pytest.FixtureRequest, bridge: Any, certificate, tmp_path: Path) -> Iterator[Proxied]:
    name = request.param
    if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists():
        pytest.fail(f"{name} is not installed (apt-get install {name}); .ci/run installs it")
    cert, key = certificate
    port = free_port()
    command = PROXIES[name](bridge.port, port, cert, key, tmp_path)
    env = dict(os.environ, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        give_up = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                pytest.fail(f"{name} exited with {process.returncode}: {process.stdout.read()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert time.monotonic() < give_up, f"{name} never listened"
            time.sleep(0.05)
        yield Proxied(bridge, port, cert)
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:  # Caddy waits for its connections with no grace period set
            process.kill()
            process.wait(5)
        process.stdout.close()


def text_of(result: Any) -> str:
    assert result.is_error is not True, result
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_an_app_over_wss_and_the_sdk_over_https(proxied, mode):
    async with (
        websocket_app(proxied, "my-app", slow_seconds=1.5, ssl=proxied.tls),
        sdk_agent(proxied, "my-app", mode, verify=proxied.tls) as client,
    ):
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo", "slow"]
        assert text_of(await client.call_tool("echo", {"title": "Buy eggs"})) == 'echo: {"title": "Buy eggs"}'
        assert text_of(await client.call_tool("slow", {})) == "slow: {}"


async def test_a_streamed_call_arrives_as_it_is_written(proxied):
    """Each keep-alive comes a second apart, long before the answer: the proxy buffers nothing."""
    headers = {
        "Authorization": f"Bearer {proxied.token('agent', 'my-app')}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    body = legacy_body("tools/call", 7, {"name": "slow", "arguments": {}})
    arrivals: list[tuple[float, str]] = []
    async with (
        websocket_app(proxied, "my-app", slow_seconds=SLOW_SECONDS, ssl=proxied.tls),
        httpx2.AsyncClient(verify=proxied.tls, timeout=WAIT) as http,
    ):
        started = time.monotonic()
        async with http.stream("POST", proxied.mcp_url, headers=headers, json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line:
                    arrivals.append((time.monotonic() - started, line))
    keep_alives = [at for at, line in arrivals if line.startswith(":")]
    (answer_at,) = [at for at, line in arrivals if line.startswith("data:")]
    assert len(keep_alives) >= 2, arrivals
    assert answer_at >= SLOW_SECONDS
    assert keep_alives[0] < answer_at - 1.5, arrivals  # buffered, it would arrive with the answer
    (data,) = [json.loads(line[5:]) for _, line in arrivals if line.startswith("data:")]
    assert data["id"] == 7 and data["result"]["content"][0]["text"] == "slow: {}"


async def test_list_changed_reaches_a_notification_stream(proxied):
    headers = {"Authorization": f"Bearer {proxied.token('agent', 'my-app')}", "Accept": "text/event-stream"}
    async with httpx2.AsyncClient(verify=proxied.tls, timeout=WAIT) as http:
        async with http.stream("GET", proxied.mcp_url, headers=headers) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            async with websocket_app(proxied, "my-app", ssl=proxied.tls):

                async def first_event() -> dict:
                    async for line in lines:
                        if line.startswith("data:"):
                            return json.loads(line[5:])
                    raise AssertionError("the stream ended")

                event = await asyncio.wait_for(first_event(), WAIT)
    assert event == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
