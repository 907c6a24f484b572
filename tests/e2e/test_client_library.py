"""`clientmcp_fast.client` keeps its own promises against a real bridge: pings, reconnects, size limit."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from clientmcp_fast.client import ClientMCP
from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES

pytestmark = pytest.mark.anyio


async def _echo(arguments: dict) -> str:
    return "ok"


def _app(bridge, client_id: str = "lib", **options) -> ClientMCP:
    app = ClientMCP(bridge.ws_url, bridge.token("client", client_id), **options)
    app.expose("echo", _echo)
    return app


def _online(bridge, client_id: str = "lib"):
    return lambda server: client_id in server.bridge.apps


async def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_an_idle_app_pings_and_stays_connected(start_bridge):
    """Spec §3.2: the library pings when idle, and pings keep the bridge's idle timer from firing."""
    bridge = start_bridge(app_idle_timeout=0.6)
    async with _app(bridge, ping_interval=0.2, reconnect=False) as app:
        await asyncio.sleep(1.8)  # three idle timeouts without a single call
        assert app.close_code is None
        assert bridge.call(_online(bridge))
    bridge.assert_nothing_leaks()


async def test_without_pings_the_bridge_closes_4408_and_the_app_reconnects(start_bridge):
    bridge = start_bridge(app_idle_timeout=0.3)
    async with _app(bridge, ping_interval=60, backoff=(0.05, 0.1)) as app:
        await _wait(lambda: app.close_code == 4408)
        await app.wait_registered()  # registered again on a new connection
        await _wait(lambda: bridge.call(_online(bridge)))


async def test_a_replaced_app_does_not_reconnect(bridge):
    """Spec §3.1: a client closed with 4409 MUST NOT reconnect automatically."""
    older = _app(bridge, backoff=(0.05, 0.1))
    await older.connect()
    async with _app(bridge, reconnect=False):
        await asyncio.wait_for(older.closed(), 10)
        assert older.close_code == 4409
        await asyncio.sleep(0.3)  # longer than the backoff: a reconnect would have replaced the newer
        assert bridge.call(lambda s: s.bridge.apps["lib"].is_open)
    await older.close()


async def test_a_result_over_4_mib_becomes_a_tool_error_saying_so(bridge):
    """Spec §3.2: a result that cannot be delivered is replaced by a tool error that says why."""

    async def huge(arguments: dict) -> str:
        return "x" * MAX_MESSAGE_BYTES

    app = _app(bridge, reconnect=False)
    app.expose("huge", huge)
    async with app:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "huge"}}
        headers = {"Authorization": f"Bearer {bridge.token('agent', 'lib')}"}
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(bridge.mcp_url, content=json.dumps(body), headers=headers)
        result = response.json()["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"] == "The result is too large to deliver (over 4 MiB)."
        assert app.close_code is None  # the connection survived it


async def test_a_bridge_that_stops_answering_is_a_dead_link():
    """Spec §3.2: nothing within the pong timeout of a ping, and the library drops the connection."""
    from websockets.asyncio.server import serve

    async def silent_after_registered(ws):
        await ws.recv()  # the register
        await ws.send('{"type":"registered"}')
        async for _ in ws:  # pings, never answered
            pass

    async with serve(silent_after_registered, "127.0.0.1", 0, subprotocols=["clientmcp.v1"]) as server:
        port = server.sockets[0].getsockname()[1]
        app = ClientMCP(
            f"ws://127.0.0.1:{port}/connect", "t", ping_interval=0.1, pong_timeout=0.3, reconnect=False
        )
        app.expose("echo", _echo)
        await app.connect()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(app.closed(), 5)
        assert asyncio.get_running_loop().time() - started < 2
        assert app.close_code == 1011  # ours, "no answer to ping", echoed by the peer
        await app.close()
