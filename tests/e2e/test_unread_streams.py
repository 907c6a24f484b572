"""An agent that opens notification streams and never reads them costs the bridge a bounded few bytes.

Reproduces the report of an unread stream growing without bound (hundreds of MB while an
app re-registered in bursts): an agent with a tiny receive window opens a legacy GET stream
and a modern listen stream and reads nothing, while an app sends 20,000 registers that each
change its tool set. The bridge's unsent data for those connections must stay small, and
the agent, once it reads, still learns that the tools changed.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
import websockets
from agents import MODERN, WAIT, modern_body

pytestmark = pytest.mark.anyio

REGISTERS = 20_000
# What an unread stream may hold at the bridge: a keep-alive and one list_changed, and the
# response head, far below what 20,000 list_changed would be (over 1 MB).
MAX_UNSENT = 16 * 1024


def unread_stream(bridge, request: bytes) -> socket.socket:
    """A connection with a tiny receive window that sends `request`, reads the head, then nothing."""
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect(("127.0.0.1", bridge.port))
    conn.sendall(request)
    conn.settimeout(WAIT)
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return conn


def legacy_get(bridge) -> bytes:
    token = bridge.token("agent", "busy")
    return (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\n\r\n"
    ).encode()


def modern_listen(bridge) -> bytes:
    token = bridge.token("agent", "busy")
    body = json.dumps(
        modern_body("subscriptions/listen", 9, {"notifications": {"toolsListChanged": True}})
    ).encode()
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        f"MCP-Protocol-Version: {MODERN}\r\nMcp-Method: subscriptions/listen\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def unsent(server) -> list[int]:
    return sorted(conn.transport.get_write_buffer_size() for conn in server.http_connections)


async def test_streams_nobody_reads_stay_small_through_a_burst_of_registers(bridge):
    streams = [unread_stream(bridge, legacy_get(bridge)), unread_stream(bridge, modern_listen(bridge))]
    token = bridge.token("client", "busy")
    async with websockets.connect(bridge.ws_url, subprotocols=["clientmcp.v1", token]) as app:

        async def registers() -> None:
            for number in range(REGISTERS):
                tool = {"name": f"tool{number % 2}", "inputSchema": {"type": "object"}}
                await app.send(json.dumps({"type": "register", "tools": [tool]}))

        sending = asyncio.create_task(registers())
        for _ in range(REGISTERS):
            assert json.loads(await asyncio.wait_for(app.recv(), WAIT)) == {"type": "registered"}
        await sending
        held = await asyncio.to_thread(bridge.call, unsent)
        assert max(held) <= MAX_UNSENT, held
        for conn in streams:  # the agent reads at last: the tools changed, and the stream lives
            conn.settimeout(WAIT)
            seen = b""
            while b"notifications/tools/list_changed" not in seen:
                chunk = await asyncio.to_thread(conn.recv, 65536)
                assert chunk, "the stream ended"
                seen += chunk
            conn.close()
