"""Legacy requests to `/mcp` (2025-03-26, 2025-06-18, 2025-11-25), on the wire (docs/protocol.md, Mapping).

initialize and its session id, ping, tools/list and tools/call in both eras' error shapes, and
2025-03-26 batches, request by request against a real bridge.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import (
    INVALID_PARAMS,
    echo,
    error_of,
    http_client,
    initialize_params,
    legacy_body,
    legacy_headers,
    modern_body,
    modern_headers,
    nothing_leaks,
    nothing_leaks_in,
    online_app,
    online_in,
    text_result,
)

from clientmcp_fast import __version__

pytestmark = pytest.mark.anyio


# -- docs/protocol.md, Mapping: legacy --------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ],
)
async def test_initialize_answers_the_requested_legacy_revision(bridge, asked, answered):
    """initialize returns the revision asked for if legacy, else 2025-11-25, with our identity and capabilities."""
    params = initialize_params(asked)
    async with (
        online_app(bridge, "x", {"echo": echo}, instructions="Use echo to test."),
        http_client(bridge) as http,
    ):
        response = await http.post(
            "/mcp", json=legacy_body("initialize", 0, params), headers=legacy_headers(bridge, "x")
        )
    assert response.status_code == 200
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": answered,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "clientmcp", "version": __version__},
            "instructions": "Use echo to test.",
        },
    }
    await nothing_leaks(bridge)


async def test_initialize_mints_a_fresh_session_id_each_time(bridge):
    """Every initialize gets its own random, visible-ASCII Mcp-Session-Id; offline means no instructions."""
    params = initialize_params()
    sessions = set()
    async with http_client(bridge) as http:
        for request_id in range(3):
            response = await http.post(
                "/mcp",
                json=legacy_body("initialize", request_id, params),
                headers=legacy_headers(bridge, "x"),
            )
            assert response.status_code == 200
            assert "instructions" not in response.json()["result"]
            session = response.headers["mcp-session-id"]
            assert len(session) >= 16 and all(0x21 <= ord(c) <= 0x7E for c in session)
            sessions.add(session)
    assert len(sessions) == 3


async def test_notifications_initialized_is_202(bridge):
    body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=body, headers=legacy_headers(bridge, "x", **{"Mcp-Session-Id": "s"})
        )
    assert response.status_code == 202
    assert response.content == b""


async def test_legacy_ping_is_an_empty_result(bridge):
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=legacy_body("ping", "p-1"), headers=legacy_headers(bridge, "x")
        )
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


@pytest.mark.parametrize(("era", "status"), [("legacy", 200), ("modern", 400)])
async def test_tools_list_with_a_cursor_is_invalid_params(bridge, era, status):
    """We never issue a cursor, so any cursor is -32602 (HTTP 200 legacy, 400 modern)."""
    if era == "modern":
        body, headers = (
            modern_body("tools/list", 1, {"cursor": "abc"}),
            modern_headers(bridge, "x", "tools/list"),
        )
    else:
        body, headers = legacy_body("tools/list", 1, {"cursor": "abc"}), legacy_headers(bridge, "x")
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == status
    assert error_of(response) == (1, INVALID_PARAMS)
    await nothing_leaks(bridge)


@pytest.mark.parametrize(("era", "status"), [("legacy", 200), ("modern", 400)])
async def test_unknown_tool_is_invalid_params_naming_it(topology, era, status):
    """A tool not in the latest register (app online): -32602 "Unknown tool: NAME"."""
    if era == "modern":
        body = modern_body("tools/call", 1, {"name": "nope", "arguments": {}})
        headers = modern_headers(topology.agent, "x", "tools/call", name="nope")
    else:
        body, headers = (
            legacy_body("tools/call", 1, {"name": "nope", "arguments": {}}),
            legacy_headers(topology.agent, "x"),
        )
    async with online_in(topology, "x", {"echo": echo}), http_client(topology.agent) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == status
    assert response.json()["error"] == {"code": INVALID_PARAMS, "message": "Unknown tool: nope"}
    await nothing_leaks_in(topology)


@pytest.mark.parametrize("arguments", [[1, 2], "text", 5, True])
@pytest.mark.parametrize(("era", "status"), [("legacy", 200), ("modern", 400)])
async def test_arguments_that_are_not_an_object_are_invalid_params(bridge, arguments, era, status):
    """tools/call arguments must be an object: -32602, and nothing reaches the app."""
    called: list[Any] = []

    async def record(arguments: dict[str, Any]) -> str:
        called.append(arguments)
        return "called"

    if era == "modern":
        body = modern_body("tools/call", 1, {"name": "record", "arguments": arguments})
        headers = modern_headers(bridge, "x", "tools/call", name="record")
    else:
        body, headers = (
            legacy_body("tools/call", 1, {"name": "record", "arguments": arguments}),
            legacy_headers(bridge, "x"),
        )
    async with online_app(bridge, "x", {"record": record}), http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == status
    assert error_of(response) == (1, INVALID_PARAMS)
    assert called == []
    await nothing_leaks(bridge)


async def test_unknown_session_ids_are_never_rejected(bridge):
    """Legacy sessions store nothing: any Mcp-Session-Id, or none, is served."""
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        for session in ("never-issued", "", "x" * 200):
            headers = legacy_headers(
                bridge, "x", **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            )
            listed = await http.post("/mcp", json=legacy_body("tools/list", 1), headers=headers)
            assert listed.status_code == 200 and [t["name"] for t in listed.json()["result"]["tools"]] == [
                "echo"
            ]
            called = await http.post(
                "/mcp",
                json=legacy_body("tools/call", 2, {"name": "echo", "arguments": {"s": 1}}),
                headers=headers,
            )
            assert called.status_code == 200 and text_result(called) == '{"s": 1}'
    await nothing_leaks(bridge)


async def test_legacy_call_result_passes_the_apps_members_unchanged(bridge):
    """Legacy: the app's CallToolResult exactly as sent, with no resultType added."""
    result = {
        "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ],
        "structuredContent": {"status": "completed", "n": [1, 2.5, None]},
        "isError": False,
        "_meta": {"app/own": {"k": "v"}},
        "unknownMember": "kept",
    }

    async def rich(arguments: dict[str, Any]) -> dict[str, Any]:
        return result

    async with online_app(bridge, "x", {"rich": rich}), http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=legacy_body("tools/call", 1, {"name": "rich"}), headers=legacy_headers(bridge, "x")
        )
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": result}
    await nothing_leaks(bridge)


# -- docs/protocol.md, Mapping: 2025-03-26 batches -------------------------------------------


async def test_batch_of_2025_03_26_is_answered_as_an_array(bridge):
    """Each element is served on its own; notifications produce no answer; order follows the requests."""
    batch = [
        legacy_body("tools/list", 1),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        legacy_body("tools/call", "two", {"name": "echo", "arguments": {"b": 2}}),
        legacy_body("ping", 3),
        legacy_body("tools/call", 4, {"name": "nope"}),
    ]
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        response = await http.post("/mcp", json=batch, headers=legacy_headers(bridge, "x"))
    assert response.status_code == 200
    answers = response.json()
    assert [answer["id"] for answer in answers] == [1, "two", 3, 4]
    assert [t["name"] for t in answers[0]["result"]["tools"]] == ["echo"]
    assert answers[1]["result"]["content"][0]["text"] == '{"b": 2}'
    assert answers[2]["result"] == {}
    assert answers[3]["error"] == {"code": INVALID_PARAMS, "message": "Unknown tool: nope"}
    await nothing_leaks(bridge)


async def test_batch_of_only_notifications_is_202(bridge):
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    ]
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=batch, headers=legacy_headers(bridge, "x"))
    assert response.status_code == 202
    assert response.content == b""


async def test_batch_naming_a_later_revision_is_invalid(bridge):
    """Batches exist only in 2025-03-26."""
    headers = legacy_headers(bridge, "x", **{"MCP-Protocol-Version": "2025-06-18"})
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=[legacy_body("ping", 1)], headers=headers)
    assert response.status_code == 400
    assert error_of(response) == (None, -32600)


async def test_an_empty_batch_and_a_counted_one_get_their_own_answers(bridge):
    """The era is checked first, then an empty batch, then one counted over the limit (not decoded)."""
    over = b"[" + b",".join([b"{}"] * 1001) + b"]"
    later = legacy_headers(bridge, "x", **{"MCP-Protocol-Version": "2025-06-18"})
    async with http_client(bridge) as http:
        empty = await http.post("/mcp", content=b" [ ] ", headers=legacy_headers(bridge, "x"))
        too_many = await http.post("/mcp", content=over, headers=legacy_headers(bridge, "x"))
        wrong_era = await http.post("/mcp", content=over, headers=later)
        not_json = await http.post("/mcp", content=over[:-1] + b",]", headers=legacy_headers(bridge, "x"))
    assert (empty.status_code, empty.json()["error"]) == (
        400,
        {"code": -32600, "message": "Invalid Request: an empty batch"},
    )
    assert too_many.json()["error"]["message"] == "Invalid Request: a batch of over 1000 elements"
    assert wrong_era.json()["error"]["message"] == "Invalid Request: batches exist only in 2025-03-26"
    assert (not_json.status_code, not_json.json()["error"]["code"]) == (400, -32700)
    await nothing_leaks(bridge)


async def test_batch_of_over_a_thousand_elements_is_refused_and_others_carry_on(bridge):
    """The protocol is silent: served in one loop turn, 4 MiB of `{}` elements stalled the bridge for seconds."""
    body = b"[" + b",".join([b"{}"] * ((4 * 1024 * 1024 - 2) // 3)) + b"]"
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        exactly = http.post(
            "/mcp", json=[legacy_body("ping", n) for n in range(1000)], headers=legacy_headers(bridge, "x")
        )
        too_many = http.post("/mcp", content=body, headers=legacy_headers(bridge, "x"))
        other = http.post(
            "/mcp", json=legacy_body("tools/call", 1, {"name": "echo"}), headers=legacy_headers(bridge, "x")
        )
        exactly, too_many, other = await asyncio.gather(exactly, too_many, other)
    assert exactly.status_code == 200 and [a["id"] for a in exactly.json()] == list(range(1000))
    assert too_many.status_code == 400
    assert too_many.json()["error"] == {
        "code": -32600,
        "message": "Invalid Request: a batch of over 1000 elements",
    }
    assert other.status_code == 200 and other.json()["result"]["content"][0]["text"] == "{}"
    await nothing_leaks(bridge)
