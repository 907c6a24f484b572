"""A tools/call in flight, on the wire (ClientMCP v1 §4.3, docs/protocol.md, Call outcomes; docs/protocol.md, Mapping).

A slow call streamed as SSE (keep-alives, then one event) or answered as plain JSON, and a
call ended early: a legacy notifications/cancelled, or the agent hanging up. Those taking
`topology` run twice (conftest.py): in one process, and with the app on one instance and the
agent on another, joined through a real nats-server (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import (
    REQUEST_CANCELLED,
    WAIT,
    HeldTool,
    RawHttp,
    SleepyTool,
    app_for,
    echo,
    http_client,
    legacy_body,
    legacy_headers,
    legacy_session,
    modern_body,
    modern_headers,
    nothing_leaks,
    nothing_leaks_in,
    online_app,
    online_in,
    text_result,
)

pytestmark = pytest.mark.anyio


# -- ClientMCP v1 §4.3, docs/protocol.md, Call outcomes: streaming slow calls -----------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_slow_call_is_streamed_with_keep_alives_then_one_message(topology, era):
    """Not done within 1 s and SSE accepted: `: keep-alive` every second, then the only message event."""
    slow = SleepyTool(
        2.5, result={"content": [{"type": "text", "text": "a\nb"}], "structuredContent": {"k": "v\n"}}
    )
    if era == "modern":
        headers = modern_headers(topology.agent, "x", "tools/call", name="slow")
        body = modern_body("tools/call", 31, {"name": "slow"})
    else:
        headers, body = legacy_headers(topology.agent, "x"), legacy_body("tools/call", 31, {"name": "slow"})
    async with online_in(topology, "x", {"slow": slow}):
        with await RawHttp.open(topology.agent) as raw:
            raw.send("POST", "/mcp", headers, body)
            response = await raw.head()
            assert response.status == 200
            assert response.headers["content-type"] == "text/event-stream"
            items = []
            while (item := await raw.sse_item()) is not None:
                items.append(item)
    *comments, last = items
    assert len(comments) >= 2 and set(comments) == {("comment", "keep-alive")}
    expected = {"content": [{"type": "text", "text": "a\nb"}], "structuredContent": {"k": "v\n"}}
    if era == "modern":
        expected["resultType"] = "complete"
    assert last == ("message", {"jsonrpc": "2.0", "id": 31, "result": expected})
    await nothing_leaks_in(topology)


async def test_slow_call_of_an_http_1_0_agent_streams_until_the_connection_closes(bridge):
    """HTTP/1.0 has no chunked coding: the stream is the raw SSE text, ended by closing the connection."""
    slow = SleepyTool(1.5, result={"content": [{"type": "text", "text": "late"}]})
    async with online_app(bridge, "x", {"slow": slow}):
        with await RawHttp.open(bridge) as raw:
            raw.send(
                "POST",
                "/mcp",
                legacy_headers(bridge, "x"),
                legacy_body("tools/call", 7, {"name": "slow"}),
                "1.0",
            )
            response = await raw.head()
            assert response.status == 200
            assert response.headers["content-type"] == "text/event-stream"
            assert response.headers["connection"] == "close"
            assert "transfer-encoding" not in response.headers and "content-length" not in response.headers
            body = await asyncio.wait_for(raw.reader.read(), 10)  # everything until the bridge closes
    *comments, last = body.split(b"\n\n")[:-1]
    assert body.endswith(b"\n\n") and comments and set(comments) == {b": keep-alive"}
    event, data = last.split(b"\n")
    assert event == b"event: message"
    assert json.loads(data.removeprefix(b"data: ")) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": "late"}]},
    }
    await nothing_leaks(bridge)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_streamed_result_stays_one_valid_event_whatever_the_apps_whitespace(bridge, era):
    """An app whose result JSON holds raw line breaks still yields one well-framed SSE message."""
    slow = SleepyTool(
        1.5, result={"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": [1, 2]}}
    )
    app = app_for(bridge, "x")
    app.expose("slow", slow)
    send = app._send

    async def pretty(conn: Any, text: str) -> None:
        # Another app library may indent its JSON; ClientMCP never does, so it is made to here.
        message = json.loads(text)
        await send(conn, json.dumps(message, indent=2) if message.get("type") == "result" else text)

    app._send = pretty  # type: ignore[method-assign]
    if era == "modern":
        headers = modern_headers(bridge, "x", "tools/call", name="slow")
        body = modern_body("tools/call", 1, {"name": "slow"})
    else:
        headers, body = legacy_headers(bridge, "x"), legacy_body("tools/call", 1, {"name": "slow"})
    async with app:
        with await RawHttp.open(bridge) as raw:
            raw.send("POST", "/mcp", headers, body)
            assert (await raw.head()).headers["content-type"] == "text/event-stream"
            answer = await raw.sse_message()
            assert await raw.sse_item() is None
    assert answer["result"]["structuredContent"] == {"a": [1, 2]}
    assert answer["result"]["content"] == [{"type": "text", "text": "x"}]
    await nothing_leaks(bridge)


async def test_slow_call_is_plain_json_when_sse_is_not_accepted(topology):
    """Accept: application/json only: the slow answer comes as one JSON body, however long it takes."""
    slow = SleepyTool(1.5)
    headers = {**legacy_headers(topology.agent, "x"), "Accept": "application/json"}
    async with online_in(topology, "x", {"slow": slow}), http_client(topology.agent) as http:
        response = await http.post(
            "/mcp", json=legacy_body("tools/call", 1, {"name": "slow"}), headers=headers
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert text_result(response) == "slept"
    await nothing_leaks_in(topology)


async def test_fast_call_is_plain_json_even_when_sse_is_accepted(bridge):
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        response = await http.post(
            "/mcp",
            json=modern_body("tools/call", 1, {"name": "echo"}),
            headers=modern_headers(bridge, "x", "tools/call", name="echo"),
        )
    assert response.headers["content-type"] == "application/json"
    assert text_result(response) == "{}"
    await nothing_leaks(bridge)


# -- ClientMCP v1 §4.3, docs/protocol.md, Mapping: cancellation -------------------------------


@pytest.mark.parametrize("with_session", [True, False])
async def test_legacy_notifications_cancelled_sends_cancel_and_ends_the_json_answer(topology, with_session):
    """notifications/cancelled naming a call of the same session: `cancel` to the app, -32800 to the agent."""
    held = HeldTool()
    async with online_in(topology, "x", {"held": held}) as app, http_client(topology.agent) as http:
        session = {"Mcp-Session-Id": await legacy_session(http, topology.agent)} if with_session else {}
        with await RawHttp.open(topology.agent) as raw:
            headers = {**legacy_headers(topology.agent, "x", **session), "Accept": "application/json"}
            raw.send("POST", "/mcp", headers, legacy_body("tools/call", 1, {"name": "held"}))
            await asyncio.wait_for(held.started.wait(), WAIT)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            notified = await http.post(
                "/mcp", json=cancel, headers=legacy_headers(topology.agent, "x", **session)
            )
            assert notified.status_code == 202
            response = await raw.head()
            assert response.status == 200
            answer = json.loads(await raw.body(response))
            assert answer == {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"},
            }
            await asyncio.wait_for(held.cancelled.wait(), WAIT)
            assert app.calls_cancelled == 1
    await nothing_leaks_in(topology)


async def test_legacy_notifications_cancelled_ends_a_streamed_answer_without_an_event(topology):
    """A call already streaming: the cancel closes the stream with no message event."""
    held = HeldTool()
    async with online_in(topology, "x", {"held": held}) as app, http_client(topology.agent) as http:
        session = await legacy_session(http, topology.agent)
        with await RawHttp.open(topology.agent) as raw:
            raw.send(
                "POST",
                "/mcp",
                legacy_headers(topology.agent, "x", **{"Mcp-Session-Id": session}),
                legacy_body("tools/call", "c1", {"name": "held"}),
            )
            response = await raw.head()  # streaming starts after 1 s
            assert response.headers["content-type"] == "text/event-stream"
            assert await raw.sse_item() == ("comment", "keep-alive")
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c1"}}
            notified = await http.post(
                "/mcp",
                json=cancel,
                headers=legacy_headers(topology.agent, "x", **{"Mcp-Session-Id": session}),
            )
            assert notified.status_code == 202
            while (item := await raw.sse_item()) is not None:
                assert item == ("comment", "keep-alive")
            await asyncio.wait_for(held.cancelled.wait(), WAIT)
            assert app.calls_cancelled == 1
    await nothing_leaks_in(topology)


@pytest.mark.parametrize(
    ("cancel_id", "cancel_session"),
    [("1", "same"), (1, "other"), (1, "none"), (2, "same")],
    ids=["id-as-string", "other-session", "no-session", "other-id"],
)
async def test_legacy_notifications_cancelled_must_name_the_call_exactly(topology, cancel_id, cancel_session):
    """Same id with its JSON type, same session: anything else cancels nothing and the call completes."""
    held = HeldTool(result="finished")
    async with online_in(topology, "x", {"held": held}) as app, http_client(topology.agent) as http:
        session = await legacy_session(http, topology.agent)
        with await RawHttp.open(topology.agent) as raw:
            headers = {
                **legacy_headers(topology.agent, "x", **{"Mcp-Session-Id": session}),
                "Accept": "application/json",
            }
            raw.send("POST", "/mcp", headers, legacy_body("tools/call", 1, {"name": "held"}))
            await asyncio.wait_for(held.started.wait(), WAIT)
            named = {"same": {"Mcp-Session-Id": session}, "other": {"Mcp-Session-Id": "other"}, "none": {}}
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": cancel_id},
            }
            notified = await http.post(
                "/mcp", json=cancel, headers=legacy_headers(topology.agent, "x", **named[cancel_session])
            )
            assert notified.status_code == 202
            held.release.set()
            response = await raw.head()
            answer = json.loads(await raw.body(response))
            assert answer["result"]["content"][0]["text"] == "finished"
            assert not held.cancelled.is_set()
            assert app.calls_cancelled == 0
    await nothing_leaks_in(topology)


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("when", ["before streaming", "while streaming"])
async def test_agent_hanging_up_mid_call_cancels_it(topology, era, when):
    """The agent closing its connection is a cancel in both eras (docs/protocol.md, Mapping)."""
    held = HeldTool()
    if era == "modern":
        headers = modern_headers(topology.agent, "x", "tools/call", name="held")
        body = modern_body("tools/call", 1, {"name": "held"})
    else:
        headers, body = legacy_headers(topology.agent, "x"), legacy_body("tools/call", 1, {"name": "held"})
    async with online_in(topology, "x", {"held": held}) as app:
        raw = await RawHttp.open(topology.agent)
        raw.send("POST", "/mcp", headers, body)
        await asyncio.wait_for(held.started.wait(), WAIT)
        if when == "while streaming":
            await raw.head()
            assert await raw.sse_item() == ("comment", "keep-alive")
        raw.close()
        await asyncio.wait_for(held.cancelled.wait(), WAIT)
        assert app.calls_cancelled == 1
    await nothing_leaks_in(topology)
