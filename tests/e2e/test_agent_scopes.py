"""Scoped agent tokens through a real bridge, the official `mcp` SDK as agent (docs/protocol.md, Scoped agent tokens).

An app with 20 tools; a token scoped to 3 sees exactly those 3, calls them, and gets for each
of the other 17 the answer a truly unknown name gets, byte for byte. Each test runs in one
process and across two instances joined by a real nats-server (conftest.py, `topology`): the
agent's instance enforces the scope before anything is forwarded.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2
import pytest
from agents import (
    LIST_CHANGED,
    MODERN,
    RawHttp,
    bearer,
    legacy_body,
    legacy_headers,
    modern_body,
    modern_headers,
    nothing_leaks_in,
    online_app,
    online_in,
    sdk_agent,
)
from conftest import SECRET
from test_observability import scrape

from clientmcp_fast.core.tokens import mint

pytestmark = pytest.mark.anyio

TOOLS = [f"tool_{n:02d}" for n in range(17)] + ["read_a", "read_b", "write_c"]
SCOPE = ["read_*", "write_c"]
VISIBLE = ["read_a", "read_b", "write_c"]


class Scoped:
    """A bridge as the agents' helpers see it, whose agent tokens carry a `tools` claim."""

    def __init__(self, bridge: Any, tools: list[str]) -> None:
        self.bridge = bridge
        self.tools = tools
        self.mcp_url = bridge.mcp_url
        self.http_url = bridge.http_url
        self.port = bridge.port

    def token(self, role: str, client_id: str, ttl: float = 3600) -> str:
        return mint(SECRET, role, client_id, ttl, time.time(), tools=self.tools)


async def ok(arguments: dict[str, Any]) -> str:
    return "ok"


async def raw_call(http: httpx2.AsyncClient, scoped: Scoped, name: str, modern: bool) -> httpx2.Response:
    """A tools/call of `name` with the scoped token, in one era, as bytes."""
    params = {"name": name, "arguments": {}}
    if modern:
        return await http.post(
            "/mcp",
            json=modern_body("tools/call", 9, params),
            headers=modern_headers(scoped, "x", "tools/call", name),
        )
    return await http.post(
        "/mcp",
        json=legacy_body("tools/call", 9, params),
        headers=legacy_headers(scoped, "x", **{"MCP-Protocol-Version": "2025-11-25"}),
    )


def without_date(response: httpx2.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in response.headers.items() if k.lower() != "date"]


@pytest.mark.parametrize("mode", ["legacy", MODERN, "auto"])
async def test_a_token_scoped_to_3_of_20_tools_sees_calls_and_hides_exactly_those(topology, mode):
    scoped = Scoped(topology.agent, SCOPE)
    async with online_in(topology, "x", dict.fromkeys(TOOLS, ok)), sdk_agent(scoped, "x", mode) as client:
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == VISIBLE
        for name in VISIBLE:
            result = await client.call_tool(name, {})
            assert result.is_error is False and result.content[0].text == "ok"
        with pytest.raises(Exception) as unknown:
            await client.call_tool("nope_99", {})
        for name in TOOLS:
            if name in VISIBLE:
                continue
            with pytest.raises(Exception) as hidden:
                await client.call_tool(name, {})
            assert type(hidden.value) is type(unknown.value)
            assert str(hidden.value) == str(unknown.value).replace("nope_99", name)
    await nothing_leaks_in(topology)


@pytest.mark.parametrize("modern", [False, True], ids=["legacy", "modern"])
async def test_a_hidden_tool_s_answer_is_the_bytes_of_an_unknown_tool_s(topology, modern):
    """Same status, headers and body (the name aside) as a name the app never declared."""
    scoped = Scoped(topology.agent, SCOPE)
    async with (
        online_in(topology, "x", dict.fromkeys(TOOLS, ok)),
        httpx2.AsyncClient(base_url=topology.agent.http_url, timeout=30) as http,
    ):
        unknown = await raw_call(http, scoped, "nope_99", modern)
        assert unknown.status_code == (400 if modern else 200)
        assert unknown.json()["error"] == {"code": -32602, "message": "Unknown tool: nope_99"}
        for name in TOOLS:
            if name in VISIBLE:
                continue
            hidden = await raw_call(http, scoped, name, modern)
            assert hidden.status_code == unknown.status_code
            assert without_date(hidden) == without_date(unknown)
            assert hidden.content == unknown.content.replace(b"nope_99", name.encode())
    await nothing_leaks_in(topology)


async def test_list_changed_fires_for_a_scoped_agent_when_only_hidden_tools_change(topology):
    """docs/protocol.md, Scoped agent tokens: it only says "read the tools again", in both eras."""
    scoped = Scoped(topology.agent, SCOPE)
    async with online_in(topology, "x", dict.fromkeys(TOOLS, ok)) as app:
        with await RawHttp.open(scoped) as legacy, await RawHttp.open(scoped) as modern:
            headers = {
                **bearer(scoped, "x"),
                "Accept": "text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            }
            legacy.send("GET", "/mcp", headers)
            assert (await legacy.head()).status == 200
            listen = modern_body("subscriptions/listen", 1, {"notifications": {"toolsListChanged": True}})
            modern.send("POST", "/mcp", modern_headers(scoped, "x", "subscriptions/listen"), listen)
            assert (await modern.head()).status == 200
            assert (await modern.sse_message())["method"] == "notifications/subscriptions/acknowledged"
            app.expose("tool_99", ok)  # outside the scope: what the agent sees is unchanged
            assert await legacy.sse_message() == LIST_CHANGED
            assert (await modern.sse_message())["method"] == "notifications/tools/list_changed"
    await nothing_leaks_in(topology)


async def test_refusals_are_counted_by_reason_never_by_token_or_client_id(start_bridge):
    """docs/operations.md, Metrics: `clientmcp_agent_refusals_total` by `reason` alone."""
    bridge = start_bridge(metrics=("127.0.0.1", 0), agent_rate=1.0)
    scoped = Scoped(bridge, SCOPE)
    async with (
        online_app(bridge, "x", dict.fromkeys(TOOLS, ok)),
        httpx2.AsyncClient(base_url=bridge.http_url, timeout=30) as http,
    ):
        hidden = await raw_call(http, scoped, "tool_00", False)  # the one request of the bucket
        assert hidden.json()["error"]["message"] == "Unknown tool: tool_00"
        over = await raw_call(http, scoped, "read_a", False)
        assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
    samples = await asyncio.to_thread(scrape, bridge)
    refusals = {
        labels: value for (name, labels), value in samples.items() if name == "clientmcp_agent_refusals_total"
    }
    assert refusals == {
        (("reason", "scope"),): 1,
        (("reason", "rate"),): 1,
        (("reason", "concurrency"),): 0,
    }


class OneToken(Scoped):
    """`Scoped`, whose every request carries the one token it minted: the limits count per token."""

    def __init__(self, bridge: Any, tools: list[str] | None = None) -> None:
        super().__init__(bridge, tools)  # type: ignore[arg-type]
        self.minted = super().token("agent", "x")

    def token(self, role: str, client_id: str, ttl: float = 3600) -> str:
        return self.minted


@pytest.mark.parametrize("ending", ["result", "app lost"])
async def test_a_call_holds_its_place_on_the_agent_s_instance_until_it_ends(start_topology, ending):
    """docs/configuration.md, Agent limits: a call counts on the agent's instance, forwarded or not."""
    topology = start_topology(agent_max_calls=1)
    agent = OneToken(topology.agent)
    started, release = asyncio.Event(), asyncio.Event()

    async def held(arguments: dict[str, Any]) -> str:
        started.set()
        await release.wait()
        return "held"

    async with httpx2.AsyncClient(base_url=topology.agent.http_url, timeout=30) as http:
        async with online_in(topology, "x", {"held": held, "ok": ok}):
            first = asyncio.create_task(raw_call(http, agent, "held", False))
            await asyncio.wait_for(started.wait(), 10)
            over = await raw_call(http, agent, "ok", False)
            assert over.status_code == 429 and over.headers["retry-after"] == "1"
            assert over.json()["error"]["message"].startswith("Too many calls in flight")
            if ending == "result":
                release.set()
                assert (await first).json()["result"]["content"][0]["text"] == "held"
                after = await raw_call(http, agent, "ok", False)
                assert after.json()["result"]["content"][0]["text"] == "ok"
        if ending == "app lost":
            assert (await first).json()["result"]["isError"] is True  # ended with the app
            async with online_in(topology, "x", {"ok": ok}):
                after = await raw_call(http, agent, "ok", False)
                assert after.json()["result"]["content"][0]["text"] == "ok"
    await nothing_leaks_in(topology)
