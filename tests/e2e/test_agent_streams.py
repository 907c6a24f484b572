"""Notification streams of `/mcp`, on the wire (ClientMCP v1 §4.4, docs/protocol.md, Notification streams).

Modern subscriptions/listen streams and the legacy GET stream: acknowledgement, list_changed
to the right streams only, the final result on shutdown, and the limit per client ID.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    LIST_CHANGED,
    META_SUBSCRIPTION,
    RawHttp,
    app_for,
    bearer,
    eventually,
    http_client,
    modern_body,
    modern_headers,
    nothing_leaks,
    online_app,
    stop_bridge,
    wait_registered,
)

pytestmark = pytest.mark.anyio


async def noop(arguments: dict[str, Any]) -> str:
    return "ok"


# -- ClientMCP v1 §4.4, docs/protocol.md, Notification streams --------------------------------


async def _listen(bridge: Any, client_id: str, request_id: Any, notifications: dict[str, Any]) -> RawHttp:
    raw = await RawHttp.open(bridge)
    body = modern_body("subscriptions/listen", request_id, {"notifications": notifications})
    raw.send("POST", "/mcp", modern_headers(bridge, client_id, "subscriptions/listen"), body)
    response = await raw.head()
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream"
    return raw


def _ack(request_id: Any, honored: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {META_SUBSCRIPTION: request_id}, "notifications": honored},
    }


@pytest.mark.parametrize("request_id", [5, "sub-1"])
async def test_listen_acknowledges_tags_and_ends_with_its_final_result(bridge, request_id):
    """Ack first (only toolsListChanged honored), list_changed tagged with the id, final result on shutdown."""
    wanted = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["file:///x"],
    }
    with await _listen(bridge, "x", request_id, wanted) as raw:
        assert await raw.sse_message() == _ack(request_id, {"toolsListChanged": True})
        # The stream is open while the app is offline; the app connecting with tools is a change.
        app = app_for(bridge, "x")
        app.expose("one", noop)
        async with app:
            tagged = {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {META_SUBSCRIPTION: request_id}},
            }
            assert await raw.sse_message() == tagged
            app.expose("two", noop)
            assert await raw.sse_message() == tagged
        assert await raw.sse_message() == tagged  # the app going offline empties its tool set
        await stop_bridge(bridge)
        final = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION: request_id}},
        }
        assert await raw.sse_message() == final
        assert await raw.sse_item() is None


async def test_listen_without_tools_list_changed_never_gets_it(bridge):
    """A listen that did not ask for toolsListChanged hears nothing of tool changes, to its final result."""
    with (
        await _listen(bridge, "x", 1, {"promptsListChanged": True}) as quiet,
        await _listen(bridge, "x", 2, {"toolsListChanged": True}) as loud,
    ):
        assert await quiet.sse_message() == _ack(1, {})
        assert await loud.sse_message() == _ack(2, {"toolsListChanged": True})
        async with online_app(bridge, "x", {"one": noop}) as app:
            assert (await loud.sse_message())["method"] == "notifications/tools/list_changed"
            app.expose("two", noop)
            assert (await loud.sse_message())["method"] == "notifications/tools/list_changed"
            await stop_bridge(bridge)
        assert await quiet.sse_message() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION: 1}},
        }
        assert await quiet.sse_item() is None


async def test_identical_register_announces_nothing(bridge):
    """A register with the same tool set is no change; the next real change is the next event."""
    with await _listen(bridge, "x", "l", {"toolsListChanged": True}) as raw:
        await raw.sse_message()  # the ack
        async with online_app(bridge, "x", {"one": noop}) as app:
            await raw.sse_message()
            app.expose("one", noop)  # the same definition again: a register, but no change
            await wait_registered(app)
            app.remove("one")
            await wait_registered(app)
            assert (await raw.sse_message())["method"] == "notifications/tools/list_changed"
            await stop_bridge(bridge)
            assert "result" in await raw.sse_message()


async def test_legacy_get_stream_receives_list_changed_and_ends_on_shutdown(bridge):
    """GET with Accept text/event-stream: list_changed on connect, change and disconnect; closed on shutdown."""
    with await RawHttp.open(bridge) as raw:
        raw.send(
            "GET",
            "/mcp",
            {**bearer(bridge, "x"), "Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
        )
        response = await raw.head()
        assert response.status == 200
        assert response.headers["content-type"] == "text/event-stream"
        async with online_app(bridge, "x", {"one": noop}) as app:
            assert await raw.sse_message() == LIST_CHANGED
            app.expose("two", noop)
            assert await raw.sse_message() == LIST_CHANGED
        assert await raw.sse_message() == LIST_CHANGED  # the app going offline empties its tool set
        await stop_bridge(bridge)
        assert await raw.sse_item() is None


async def test_get_without_sse_in_accept_is_406(bridge):
    async with http_client(bridge) as http:
        response = await http.get("/mcp", headers={**bearer(bridge, "x"), "Accept": "application/json"})
    assert response.status_code == 406


async def test_notification_streams_per_client_are_limited(start_bridge):
    """Past max_streams_per_client, both kinds of stream get 429; other client IDs are not affected."""
    bridge = start_bridge(max_streams_per_client=1)
    with await RawHttp.open(bridge) as first, await RawHttp.open(bridge) as other:
        first.send("GET", "/mcp", {**bearer(bridge, "x"), "Accept": "text/event-stream"})
        assert (await first.head()).status == 200
        async with http_client(bridge) as http:
            response = await http.get("/mcp", headers={**bearer(bridge, "x"), "Accept": "text/event-stream"})
            assert response.status_code == 429
            body = modern_body("subscriptions/listen", "L", {"notifications": {"toolsListChanged": True}})
            response = await http.post(
                "/mcp", json=body, headers=modern_headers(bridge, "x", "subscriptions/listen")
            )
            assert response.status_code == 429
            assert response.json()["id"] == "L"
        other.send("GET", "/mcp", {**bearer(bridge, "y"), "Accept": "text/event-stream"})
        assert (await other.head()).status == 200
        first.close()
        await eventually(bridge, lambda s: s.bridge.stream_count == 1)
        again = await _listen(bridge, "x", 3, {"toolsListChanged": True})
        again.close()
    await nothing_leaks(bridge)
