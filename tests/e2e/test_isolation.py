"""Isolation between client IDs on a real bridge (ClientMCP v1 §7): tools, calls, cancels and notifications of one
app are never visible to an agent holding another app's token.

Two apps, `x` and `y`, run on `ClientMCP` in this test's loop; agents are the MCP SDK or
hand-written HTTP. Where "never" must be shown, streams are read up to their end at
shutdown, so that a notification that leaked would have been seen.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import (
    DISCONNECTED,
    LIST_CHANGED,
    META_SUBSCRIPTION,
    MODERN,
    OFFLINE,
    REQUEST_CANCELLED,
    WAIT,
    HeldTool,
    RawHttp,
    bearer,
    http_client,
    legacy_body,
    legacy_headers,
    legacy_session,
    modern_body,
    modern_headers,
    nothing_leaks,
    online_app,
    sdk_agent,
    stop_bridge,
)

pytestmark = pytest.mark.anyio


def answering(client_id: str):
    async def who(arguments: dict[str, Any]) -> str:
        return f"{client_id} answered {json.dumps(arguments, sort_keys=True)}"

    return who


def legacy_call(
    raw: RawHttp, bridge: Any, client_id: str, request_id: Any, name: str, **session: str
) -> None:
    """A legacy tools/call answered as JSON (never streamed), written on `raw`."""
    headers = {**legacy_headers(bridge, client_id, **session), "Accept": "application/json"}
    raw.send("POST", "/mcp", headers, legacy_body("tools/call", request_id, {"name": name, "arguments": {}}))


async def json_answer(raw: RawHttp) -> dict[str, Any]:
    response = await raw.head()
    assert response.status == 200
    return json.loads(await raw.body(response))


async def cancel(http: Any, bridge: Any, client_id: str, request_id: Any, **session: str) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    response = await http.post("/mcp", json=body, headers=legacy_headers(bridge, client_id, **session))
    assert response.status_code == 202


# -- tools ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_an_agent_lists_only_its_own_apps_tools(bridge, mode):
    async with (
        online_app(bridge, "x", {"x_only": answering("x")}, instructions="I am x."),
        online_app(bridge, "y", {"y_only": answering("y"), "y_too": answering("y")}, instructions="I am y."),
        sdk_agent(bridge, "x", mode) as agent_x,
        sdk_agent(bridge, "y", mode) as agent_y,
    ):
        assert [tool.name for tool in (await agent_x.list_tools()).tools] == ["x_only"]
        assert [tool.name for tool in (await agent_y.list_tools()).tools] == ["y_only", "y_too"]
        if mode == "legacy":
            assert agent_x.instructions == "I am x."
            assert agent_y.instructions == "I am y."
    await nothing_leaks(bridge)


async def test_an_agent_cannot_call_another_apps_tool(bridge):
    """A tool of y named by x's agent is unknown while x is online, and x's offline error while it is not."""
    y_calls: list[dict[str, Any]] = []

    async def y_tool(arguments: dict[str, Any]) -> str:
        y_calls.append(arguments)
        return "y ran"

    async with online_app(bridge, "y", {"y_tool": y_tool}), http_client(bridge) as http:
        body = legacy_body("tools/call", 1, {"name": "y_tool", "arguments": {}})
        offline = await http.post("/mcp", json=body, headers=legacy_headers(bridge, "x"))
        assert offline.json()["result"]["content"][0]["text"] == OFFLINE
        assert offline.json()["result"]["isError"] is True
        async with online_app(bridge, "x", {"x_tool": answering("x")}):
            unknown = await http.post("/mcp", json=body, headers=legacy_headers(bridge, "x"))
            assert unknown.json()["error"] == {"code": -32602, "message": "Unknown tool: y_tool"}
            modern = await http.post(
                "/mcp",
                json=modern_body("tools/call", 2, {"name": "y_tool", "arguments": {}}),
                headers=modern_headers(bridge, "x", "tools/call", name="y_tool"),
            )
            assert modern.status_code == 400
            assert modern.json()["error"]["message"] == "Unknown tool: y_tool"
    assert y_calls == []
    await nothing_leaks(bridge)


# -- calls ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_calls_reach_only_the_agents_own_app(bridge, mode):
    """Both apps expose a tool of the same name; each agent's calls, even concurrent, reach its own app."""
    async with (
        online_app(bridge, "x", {"who": answering("x")}),
        online_app(bridge, "y", {"who": answering("y")}),
        sdk_agent(bridge, "x", mode) as agent_x,
        sdk_agent(bridge, "y", mode) as agent_y,
    ):
        calls = [agent.call_tool("who", {"n": n}) for n in range(10) for agent in (agent_x, agent_y)]
        results = await asyncio.wait_for(asyncio.gather(*calls), WAIT)
        texts = [result.content[0].text for result in results]
        assert texts == [f'{who} answered {{"n": {n}}}' for n in range(10) for who in ("x", "y")]
    await nothing_leaks(bridge)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_same_request_ids_from_two_agents_without_sessions_stay_apart(bridge, era):
    """Agents of x and y both use id 1, concurrently and without sessions: each gets its own app's answer."""
    held_x, held_y = HeldTool("from x"), HeldTool("from y")
    async with online_app(bridge, "x", {"held": held_x}), online_app(bridge, "y", {"held": held_y}):
        raws = {client_id: await RawHttp.open(bridge) for client_id in ("x", "y")}
        try:
            for client_id, raw in raws.items():
                if era == "legacy":
                    legacy_call(raw, bridge, client_id, 1, "held")
                else:
                    headers = modern_headers(
                        bridge, client_id, "tools/call", name="held", Accept="application/json"
                    )
                    raw.send("POST", "/mcp", headers, modern_body("tools/call", 1, {"name": "held"}))
            await asyncio.wait_for(asyncio.gather(held_x.started.wait(), held_y.started.wait()), WAIT)
            held_y.release.set()
            answer_y = await json_answer(raws["y"])
            assert answer_y["id"] == 1 and answer_y["result"]["content"][0]["text"] == "from y"
            assert not held_x.release.is_set()
            held_x.release.set()
            answer_x = await json_answer(raws["x"])
            assert answer_x["id"] == 1 and answer_x["result"]["content"][0]["text"] == "from x"
        finally:
            for raw in raws.values():
                raw.close()
    await nothing_leaks(bridge)


# -- cancels ----------------------------------------------------------------------------------


async def test_a_cancel_from_another_agent_with_the_same_id_cancels_only_its_own_call(bridge):
    """x and y both have call 1 in flight without sessions; y's notifications/cancelled ends y's call only."""
    held_x, held_y = HeldTool("from x"), HeldTool("from y")
    async with (
        online_app(bridge, "x", {"held": held_x}) as app_x,
        online_app(bridge, "y", {"held": held_y}) as app_y,
        http_client(bridge) as http,
    ):
        with await RawHttp.open(bridge) as raw_x, await RawHttp.open(bridge) as raw_y:
            legacy_call(raw_x, bridge, "x", 1, "held")
            legacy_call(raw_y, bridge, "y", 1, "held")
            await asyncio.wait_for(asyncio.gather(held_x.started.wait(), held_y.started.wait()), WAIT)
            await cancel(http, bridge, "y", 1)
            answer_y = await json_answer(raw_y)
            assert answer_y == {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"},
            }
            await asyncio.wait_for(held_y.cancelled.wait(), WAIT)
            held_x.release.set()
            answer_x = await json_answer(raw_x)
            assert answer_x["result"]["content"][0]["text"] == "from x"
            assert not held_x.cancelled.is_set()
            assert (app_x.calls_cancelled, app_y.calls_cancelled) == (0, 1)
    await nothing_leaks(bridge)


@pytest.mark.parametrize("with_session", [False, True])
async def test_a_cancel_naming_another_apps_call_cancels_nothing(bridge, with_session):
    """y's agent naming x's call id (and even x's session id) does not reach x's call."""
    held = HeldTool("from x")
    async with online_app(bridge, "x", {"held": held}) as app_x, http_client(bridge) as http:
        session: dict[str, str] = {}
        if with_session:
            session = {"Mcp-Session-Id": await legacy_session(http, bridge, "x")}
        with await RawHttp.open(bridge) as raw:
            legacy_call(raw, bridge, "x", "call-1", "held", **session)
            await asyncio.wait_for(held.started.wait(), WAIT)
            await cancel(http, bridge, "y", "call-1", **session)
            held.release.set()
            answer = await json_answer(raw)
            assert answer["result"]["content"][0]["text"] == "from x"
            assert not held.cancelled.is_set()
            assert app_x.calls_cancelled == 0
    await nothing_leaks(bridge)


async def test_one_apps_disconnect_fails_only_its_own_calls(bridge):
    held_x, held_y = HeldTool("from x"), HeldTool("from y")
    async with online_app(bridge, "y", {"held": held_y}), http_client(bridge) as http:
        async with online_app(bridge, "x", {"held": held_x}) as app_x:
            call_x = asyncio.ensure_future(
                http.post(
                    "/mcp",
                    json=legacy_body("tools/call", 1, {"name": "held"}),
                    headers=legacy_headers(bridge, "x"),
                )
            )
            call_y = asyncio.ensure_future(
                http.post(
                    "/mcp",
                    json=legacy_body("tools/call", 1, {"name": "held"}),
                    headers=legacy_headers(bridge, "y"),
                )
            )
            await asyncio.wait_for(asyncio.gather(held_x.started.wait(), held_y.started.wait()), WAIT)
            await app_x.close()
            answer_x = (await asyncio.wait_for(call_x, WAIT)).json()
            assert answer_x["result"]["content"][0]["text"] == DISCONNECTED
        assert not held_y.cancelled.is_set()
        held_y.release.set()
        answer_y = (await asyncio.wait_for(call_y, WAIT)).json()
        assert answer_y["result"]["content"][0]["text"] == "from y"
    await nothing_leaks(bridge)


# -- notifications ----------------------------------------------------------------------------


async def test_notifications_reach_only_the_streams_of_the_changed_app(bridge):
    """x's tool changes reach x's streams; y's listen and GET streams hear nothing up to their end."""
    listen_x, listen_y, get_y = [await RawHttp.open(bridge) for _ in range(3)]
    try:
        for raw, client_id, request_id in ((listen_x, "x", 1), (listen_y, "y", 1)):
            body = modern_body(
                "subscriptions/listen", request_id, {"notifications": {"toolsListChanged": True}}
            )
            raw.send("POST", "/mcp", modern_headers(bridge, client_id, "subscriptions/listen"), body)
            assert (await raw.head()).status == 200
            ack = await raw.sse_message()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
        get_y.send("GET", "/mcp", {**bearer(bridge, "y"), "Accept": "text/event-stream"})
        assert (await get_y.head()).status == 200
        tagged = {**LIST_CHANGED, "params": {"_meta": {META_SUBSCRIPTION: 1}}}
        async with online_app(bridge, "x", {"one": answering("x")}) as app_x:
            assert await listen_x.sse_message() == tagged
            app_x.expose("two", answering("x"))
            assert await listen_x.sse_message() == tagged
        assert await listen_x.sse_message() == tagged
        await stop_bridge(bridge)
        final = {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION: 1}},
        }
        assert await listen_x.sse_message() == final
        # y's streams: nothing but their end (the listen's final result, the GET's last chunk).
        assert await listen_y.sse_message() == final
        assert await listen_y.sse_item() is None
        assert await get_y.sse_item() is None
    finally:
        for raw in (listen_x, listen_y, get_y):
            raw.close()


async def test_sdk_listen_of_y_hears_nothing_of_xs_changes(bridge):
    """SDK agents of x and y both listen; x's changes reach x's subscription only, to y's graceful end."""
    async with (
        sdk_agent(bridge, "x", MODERN) as agent_x,
        sdk_agent(bridge, "y", MODERN) as agent_y,
        agent_x.listen(tools_list_changed=True) as subscription_x,
        agent_y.listen(tools_list_changed=True) as subscription_y,
    ):
        events_x = aiter(subscription_x)
        async with online_app(bridge, "x", {"one": answering("x")}) as app_x:
            await asyncio.wait_for(anext(events_x), WAIT)
            app_x.expose("two", answering("x"))
            await asyncio.wait_for(anext(events_x), WAIT)
        await asyncio.wait_for(anext(events_x), WAIT)
        await stop_bridge(bridge)
        # The bridge ends y's subscription with its final result, after anything it sent before.
        heard_by_y = [event async for event in subscription_y]
        assert heard_by_y == []
