"""Pipelined calls from an agent that does not read their answers are served one unread answer at a time.

Reproduces the report of 150 pipelined `tools/call` with results near 4 MiB, never read,
taking the bridge from 46 MB to 650 MB: the pipelining limit bounded what was read, not
what was answered. Now a connection whose answers wait unsent is not served further until
the agent reads, so it holds about one answer; and every call is still answered, in order.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
import websockets
from agents import WAIT
from rawhttp import mcp_post, tool_call

pytestmark = pytest.mark.anyio

CALLS = 20
RESULT_TEXT = "x" * (1024 * 1024)  # each answer about 1 MiB


def read_answers(reader, count: int) -> list[dict]:
    """`count` JSON answers with a Content-Length, read off a blocking socket file."""
    bodies = []
    for _ in range(count):
        status = reader.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        length = 0
        while (line := reader.readline()) != b"\r\n":
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        bodies.append(json.loads(reader.read(length)))
    return bodies


async def test_unread_answers_hold_back_the_next_pipelined_call(bridge):
    calls_seen = 0
    token = bridge.token("client", "big")
    async with websockets.connect(bridge.ws_url, subprotocols=["clientmcp.v1", token], max_size=None) as app:
        tool = {"name": "big", "inputSchema": {"type": "object"}}
        await app.send(json.dumps({"type": "register", "tools": [tool]}))
        assert json.loads(await asyncio.wait_for(app.recv(), WAIT)) == {"type": "registered"}

        async def answer_calls() -> None:
            nonlocal calls_seen
            async for message in app:
                call = json.loads(message)
                if call.get("type") == "call":
                    calls_seen += 1
                    result = {"content": [{"type": "text", "text": RESULT_TEXT}]}
                    await app.send(json.dumps({"type": "result", "id": call["id"], "result": result}))

        answering = asyncio.create_task(answer_calls())
        agent = socket.socket()
        agent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        agent.connect(("127.0.0.1", bridge.port))
        agent_token = bridge.token("agent", "big")
        agent.sendall(
            b"".join(mcp_post(tool_call("big", {}, number), agent_token) for number in range(CALLS))
        )
        await asyncio.sleep(1.5)  # time enough to answer them all, were nothing held back
        held = await asyncio.to_thread(
            bridge.call, lambda s: max(c.transport.get_write_buffer_size() for c in s.http_connections)
        )
        assert calls_seen <= 3, calls_seen
        assert held <= 3 * len(RESULT_TEXT), held

        # The agent reads at last (in a thread: the app answers on this loop): every call, in order.
        agent.settimeout(WAIT)
        bodies = await asyncio.to_thread(read_answers, agent.makefile("rb"), CALLS)
        for number, body in enumerate(bodies):
            assert body["id"] == number and body["result"]["content"][0]["text"] == RESULT_TEXT
        assert calls_seen == CALLS
        agent.close()
        answering.cancel()
