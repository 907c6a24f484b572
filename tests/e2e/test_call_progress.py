"""Progress of a long call, from the app to the agent (docs/protocol.md, Progress).

The agent is the official `mcp` SDK with a `progress_callback`, in both eras, through one
bridge and through two instances joined by NATS; the app is the bare `websockets` library,
so that what it sends is exactly what the test writes. Hand-written requests and app
messages check what the SDK never sends: bad tokens, bad reports, floods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import websockets
from agents import (
    INVALID_PARAMS,
    MODERN,
    WAIT,
    answering_app,
    error_of,
    eventually,
    http_client,
    modern_body,
    modern_headers,
    nothing_leaks,
    nothing_leaks_in,
    result_message,
    sdk_agent,
    work_register,
)

pytestmark = pytest.mark.anyio

STEPS = [(1.0, 3.0, "Copying 1 of 3"), (2.0, 3.0, "Copying 2 of 3"), (3.0, 3.0, None)]


@contextlib.asynccontextmanager
async def reporting_app(
    bridge: Any, client_id: str, report: Callable[[Any, dict[str, Any]], Any], *, progress: bool = True
) -> AsyncIterator[websockets.ClientConnection]:
    """An app with one tool, `work`, whose calls `report(ws, call)` runs before the result `done`."""

    async def answer(ws: websockets.ClientConnection, call: dict[str, Any]) -> None:
        await report(ws, call)
        await ws.send(result_message(call, "done"))

    async with answering_app(bridge, client_id, work_register(progress=progress), answer) as ws:
        yield ws


async def report_steps(ws: Any, call: dict[str, Any]) -> None:
    """Three reports, a little apart (the SDK reads them as they come)."""
    for progress, total, message in STEPS:
        report: dict[str, Any] = {"type": "progress", "id": call["id"], "progress": progress, "total": total}
        if message is not None:
            report["message"] = message
        await ws.send(json.dumps(report))
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_receives_the_apps_progress_in_order(start_topology, mode):
    """`call_tool(..., progress_callback=...)` gets every report, in order, in both eras, in one process or two."""
    topology = start_topology()
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with reporting_app(topology.app, "x", report_steps), sdk_agent(topology.agent, "x", mode) as client:
        await asyncio.to_thread(topology.sees, "x", 1)
        result = await client.call_tool("work", {}, progress_callback=on_progress)
        assert result.content[0].text == "done"
    assert heard == STEPS
    await nothing_leaks_in(topology)


async def sse_messages(response: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE answer, in order."""
    messages = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            messages.append(json.loads(line[6:]))
    return messages


def tools_call(request_id: Any, **meta: Any) -> dict[str, Any]:
    """A 2026-07-28 tools/call of `work` whose _meta has these members besides the envelope."""
    body = modern_body("tools/call", request_id, {"name": "work", "arguments": {}})
    body["params"]["_meta"].update(meta)
    return body


def call_with_token(http: Any, bridge: Any, token: Any, request_id: Any = 1) -> Any:
    """A 2026-07-28 tools/call of `work` whose _meta carries `token` as its progressToken."""
    body = tools_call(request_id, progressToken=token)
    return http.stream(
        "POST", bridge.mcp_url, json=body, headers=modern_headers(bridge, "x", "tools/call", "work")
    )


async def test_a_flood_is_paced_to_ten_a_second_and_ends_with_the_latest(bridge):
    """10,000 reports in a burst reach the agent as at most eleven events, increasing, the last before the answer."""

    async def flood(ws: Any, call: dict[str, Any]) -> None:
        for step in range(1, 10_001):
            await ws.send(
                json.dumps({"type": "progress", "id": call["id"], "progress": step, "total": 10_000})
            )
        await asyncio.sleep(0.2)

    async with reporting_app(bridge, "x", flood), http_client(bridge) as http:
        async with call_with_token(http, bridge, "tok-1") as response:
            assert response.headers["content-type"] == "text/event-stream", await response.aread()
            messages = await sse_messages(response)
    reports = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert messages[-1]["result"]["content"][0]["text"] == "done"
    assert 2 <= len(reports) <= 11, reports  # ten within the second, and the last held back
    assert all(report["progressToken"] == "tok-1" for report in reports)
    steps = [report["progress"] for report in reports]
    assert steps == sorted(set(steps)) and steps[-1] == 10_000
    await eventually(bridge, lambda s: not s.bridge._progress_waiting)
    await nothing_leaks(bridge)


async def test_the_token_comes_back_with_its_json_type(bridge):
    """A number token is answered as that number: the SDK matches reports to calls by it."""
    async with reporting_app(bridge, "x", report_steps), http_client(bridge) as http:
        async with call_with_token(http, bridge, 7) as response:
            messages = await sse_messages(response)
    assert [m["params"]["progressToken"] for m in messages if "method" in m] == [7, 7, 7]


@pytest.mark.parametrize("token", [None, True, {"a": 1}, [1], 1.5])
async def test_a_progress_token_that_is_not_a_string_or_an_integer_is_invalid_params(bridge, token):
    """MCP allows a string or a number: anything else is -32602 before the app hears of the call."""
    called = []

    async def record(ws: Any, call: dict[str, Any]) -> None:
        called.append(call)

    async with reporting_app(bridge, "x", record), http_client(bridge) as http:
        body = tools_call(1, progressToken=token)
        response = await http.post(
            bridge.mcp_url, json=body, headers=modern_headers(bridge, "x", "tools/call", "work")
        )
    if token == 1.5:  # a JSON number: MCP's progressToken is `string | number`
        assert response.status_code == 200
        return
    assert response.status_code == 400
    assert error_of(response) == (1, INVALID_PARAMS)
    assert (
        response.json()["error"]["message"]
        == "Invalid params: _meta.progressToken must be a string or a number"
    )
    assert called == []


async def test_without_a_token_reports_are_dropped_and_the_answer_is_json(bridge):
    """No progressToken: the reports go nowhere, and a call answered within a second is plain JSON."""

    async def quick(ws: Any, call: dict[str, Any]) -> None:
        await ws.send(json.dumps({"type": "progress", "id": call["id"], "progress": 1}))

    async with reporting_app(bridge, "x", quick), http_client(bridge) as http:
        body = tools_call(1)
        response = await http.post(
            bridge.mcp_url, json=body, headers=modern_headers(bridge, "x", "tools/call", "work")
        )
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["content"][0]["text"] == "done"


async def test_an_app_that_did_not_register_progress_is_not_heard(bridge):
    """`progress` from an app without `progress: true` is an unknown type, as to a v1 bridge: ignored."""

    async def undeclared(ws: Any, call: dict[str, Any]) -> None:
        await ws.send(json.dumps({"type": "progress", "id": call["id"], "progress": "half"}))
        await ws.send(json.dumps({"type": "progress", "id": call["id"], "progress": 1}))

    async with reporting_app(bridge, "x", undeclared, progress=False), http_client(bridge) as http:
        async with call_with_token(http, bridge, "t") as response:
            body = await response.aread()
    assert json.loads(body)["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        ({"id": 5, "progress": 1}, "progress: id must be the call's id, a string"),
        ({"id": "1"}, "progress: progress is missing"),
        ({"id": "1", "progress": "half"}, "progress: progress must be a number"),
        ({"id": "1", "progress": True}, "progress: progress must be a number"),
        ({"id": "1", "progress": 1e999}, "progress: progress must be a finite number"),
        ({"id": "1", "progress": 1, "total": "ten"}, "progress: total must be a number"),
        ({"id": "1", "progress": 1, "message": 3}, "progress: message must be a string"),
        ({"id": "1", "progress": 1, "message": "x" * 1025}, "progress: message over 1024 characters"),
    ],
)
async def test_a_malformed_report_closes_the_app_with_4400(bridge, report, reason):
    """A known type with wrong members is a protocol error (ClientMCP v1 §3.3), whatever call it names."""
    token = bridge.token("client", "x")
    async with websockets.connect(bridge.ws_url, subprotocols=["clientmcp.v1", token]) as ws:
        await ws.send(json.dumps({"type": "register", "tools": [], "progress": True}))
        assert json.loads(await ws.recv()) == {"type": "registered"}
        await ws.send(json.dumps({"type": "progress", **report}).replace("Infinity", "1e999"))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), WAIT)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4400, reason)
    await nothing_leaks(bridge)


async def test_reports_for_unknown_finished_or_repeated_steps_are_ignored(bridge):
    """Unknown and finished ids are ignored as a late result is; a step not above the last is dropped."""
    finished: list[str] = []

    async def odd(ws: Any, call: dict[str, Any]) -> None:
        await ws.send(json.dumps({"type": "progress", "id": "no-such-call", "progress": 1}))
        for step in (2, 2, 1, 3):
            await ws.send(json.dumps({"type": "progress", "id": call["id"], "progress": step}))
            await asyncio.sleep(0.12)
        finished.append(call["id"])

    async with reporting_app(bridge, "x", odd) as ws, http_client(bridge) as http:
        async with call_with_token(http, bridge, "t") as response:
            messages = await sse_messages(response)
        await ws.send(json.dumps({"type": "progress", "id": finished[0], "progress": 9}))
        async with call_with_token(http, bridge, "t", 2) as response:  # the app is still connected
            again = await sse_messages(response)
    for answer in (messages, again):
        assert [m["params"]["progress"] for m in answer if "method" in m] == [2, 3]
        assert answer[-1]["result"]["content"][0]["text"] == "done"
