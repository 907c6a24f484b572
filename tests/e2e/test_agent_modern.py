"""2026-07-28 requests to `/mcp`, on the wire (MCP 2026-07-28, basic/transports; docs/protocol.md).

The modern ladder (`_meta`, the routing headers, `Mcp-Param-*`, the method) and the mapping of
server/discover, tools/list and tools/call, request by request against a real bridge.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    META_CAPABILITIES,
    META_SERVER_INFO,
    META_VERSION,
    METHOD_NOT_FOUND,
    MODERN,
    SUPPORTED,
    RawHttp,
    app_for,
    echo,
    envelope,
    error_of,
    http_client,
    legacy_body,
    legacy_headers,
    modern_body,
    modern_headers,
    nothing_leaks,
    online_app,
    text_result,
)

from clientmcp_fast import __version__

pytestmark = pytest.mark.anyio

FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "days": {"type": "integer", "x-mcp-header": "Days"},
        "detail": {"type": "boolean", "x-mcp-header": "Detail"},
    },
}


# -- the modern ladder: docs/protocol.md, the order of checks; MCP 2026-07-28, basic/transports ---


@pytest.mark.parametrize("method", ["tools/list", "tools/call", "initialize", "ping", "no/such/method"])
async def test_modern_request_without_meta_is_invalid_params_whatever_the_method(bridge, method):
    """Header 2026-07-28 but no params._meta: 400 -32602, for known and unknown methods alike."""
    body = {"jsonrpc": "2.0", "id": "m", "method": method, "params": {"name": "echo"}}
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=body, headers=modern_headers(bridge, "x", method, name="echo")
        )
    assert response.status_code == 400
    assert error_of(response) == ("m", INVALID_PARAMS)


@pytest.mark.parametrize("missing", [META_CAPABILITIES, "all but the version"])
async def test_modern_meta_without_client_capabilities_is_invalid_params(bridge, missing):
    """_meta must carry clientCapabilities as well as the version."""
    body = modern_body("tools/list", 8)
    if missing == META_CAPABILITIES:
        del body["params"]["_meta"][META_CAPABILITIES]
    else:
        body["params"]["_meta"] = {META_VERSION: MODERN}
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=modern_headers(bridge, "x", "tools/list"))
    assert response.status_code == 400
    assert error_of(response) == (8, INVALID_PARAMS)


@pytest.mark.parametrize("meta", [5, 1.5, "2026-07-28", True, None, [MODERN]], ids=repr)
async def test_modern_meta_that_is_not_an_object_is_invalid_params(bridge, meta):
    """_meta of any other JSON type carries nothing: -32602, as when its members are missing."""
    body = modern_body("tools/list", 9)
    body["params"]["_meta"] = meta
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=modern_headers(bridge, "x", "tools/list"))
    assert response.status_code == 400
    assert error_of(response) == (9, INVALID_PARAMS)


async def test_modern_request_without_the_version_header_is_a_header_mismatch(bridge):
    """_meta names 2026-07-28 but MCP-Protocol-Version is missing: -32020."""
    headers = modern_headers(bridge, "x", "tools/list")
    del headers["MCP-Protocol-Version"]
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=modern_body("tools/list", 2), headers=headers)
    assert response.status_code == 400
    assert error_of(response) == (2, HEADER_MISMATCH)


@pytest.mark.parametrize("version", [5, None, ["2026-07-28"], {"v": "2026-07-28"}], ids=repr)
async def test_modern_header_with_a_body_version_that_is_not_a_string_is_a_header_mismatch(bridge, version):
    """The header names 2026-07-28, _meta's protocolVersion is there but no string: nothing to match, -32020."""
    body = modern_body("tools/list", 4)
    body["params"]["_meta"][META_VERSION] = version
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=modern_headers(bridge, "x", "tools/list"))
    assert response.status_code == 400
    assert error_of(response) == (4, HEADER_MISMATCH)


@pytest.mark.parametrize("mcp_method", [None, "TOOLS/LIST", "tools/call", "tools/list/", ""])
async def test_mcp_method_header_must_equal_the_method(bridge, mcp_method):
    """Mcp-Method missing, or different in any way including case: -32020."""
    headers = modern_headers(bridge, "x", "tools/list")
    if mcp_method is None:
        del headers["Mcp-Method"]
    else:
        headers["Mcp-Method"] = mcp_method
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=modern_body("tools/list", 3), headers=headers)
    assert response.status_code == 400
    assert error_of(response) == (3, HEADER_MISMATCH)


@pytest.mark.parametrize(
    ("mcp_name", "accepted"),
    [
        ("echo", True),
        ("  echo  ", True),  # optional whitespace around a header value is not part of it
        ("=?base64?ZWNobw==?=", True),
        (None, False),
        ("Echo", False),
        ("other", False),
        ("=?base64?ZWNobw?=", False),  # not the canonical padding
        ("=?base64?b3RoZXI=?=", False),
    ],
)
async def test_mcp_name_header_must_equal_the_tool_name(bridge, mcp_name, accepted):
    """Mcp-Name is compared after trimming and base64 sentinel decoding; anything else is -32020."""
    headers = modern_headers(bridge, "x", "tools/call")
    if mcp_name is not None:
        headers["Mcp-Name"] = mcp_name
    body = modern_body("tools/call", "c", {"name": "echo", "arguments": {"a": 1}})
    async with online_app(bridge, "x", {"echo": echo}):
        # Twice: the second time, the bridge has the value's meaning remembered.
        for _ in range(2):
            # A bare socket: HTTP libraries refuse to send a value with surrounding spaces.
            with await RawHttp.open(bridge) as raw:
                raw.send("POST", "/mcp", headers, body)
                response = await raw.head()
                answer = json.loads(await raw.body(response))
            if accepted:
                assert response.status == 200
                assert answer["result"]["content"][0]["text"] == '{"a": 1}'
            else:
                assert response.status == 400
                assert (answer["id"], answer["error"]["code"]) == ("c", HEADER_MISMATCH)
    await nothing_leaks(bridge)


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/list", "no/such/method"]
)
async def test_methods_the_modern_era_lacks_are_404_method_not_found(bridge, method):
    """With a valid modern envelope, initialize, ping and unknown methods are 404 -32601."""
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=modern_body(method, 12), headers=modern_headers(bridge, "x", method)
        )
    assert response.status_code == 404
    assert error_of(response) == (12, METHOD_NOT_FOUND)


async def test_modern_notifications_are_accepted_and_ignored(bridge):
    """A modern notification (even notifications/cancelled) is 202 with no body."""
    body = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1, "_meta": envelope()},
    }
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=body, headers=modern_headers(bridge, "x", "notifications/cancelled")
        )
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize(
    ("arguments", "params", "accepted"),
    [
        (
            {"region": "us-west1", "days": 3, "detail": True},
            {"Region": "us-west1", "Days": "3", "Detail": "true"},
            True,
        ),
        ({"region": "Zürich"}, {"Region": "=?base64?WsO8cmljaA==?="}, True),
        ({"region": " padded "}, {"Region": "=?base64?IHBhZGRlZCA=?="}, True),
        ({"days": 42}, {"Days": "42.0"}, True),  # integers compare as numbers
        ({"region": None}, {}, True),  # null is absent: no header expected
        ({}, {}, True),
        ({"region": "us-west1"}, {"Region": "us-east1"}, False),
        ({"days": 3}, {"Days": "4"}, False),
        ({"detail": False}, {"Detail": "False"}, False),  # values are case-sensitive
        ({"region": "us-west1"}, {}, False),  # the argument is there, its header is not
        ({}, {"Region": "us-west1"}, False),  # the header is there, its argument is not
        ({"region": "Hello"}, {"Region": "=?base64?SGVsbG8?=?="}, False),  # malformed sentinel
    ],
)
async def test_mcp_param_headers_follow_the_apps_x_mcp_header_annotations(
    bridge, arguments, params, accepted
):
    """Mcp-Param-* must carry exactly the annotated arguments (MCP 2026-07-28, x-mcp-header): 400 -32020 otherwise."""
    headers = modern_headers(bridge, "x", "tools/call", name="forecast")
    headers.update({f"Mcp-Param-{name}": value for name, value in params.items()})
    body = modern_body("tools/call", 21, {"name": "forecast", "arguments": arguments})
    async with (
        online_app(bridge, "x", {"forecast": echo}, schemas={"forecast": FORECAST_SCHEMA}),
        http_client(bridge) as http,
    ):
        response = await http.post("/mcp", json=body, headers=headers)
    if accepted:
        assert response.status_code == 200
        assert json.loads(text_result(response)) == arguments
    else:
        assert response.status_code == 400
        assert error_of(response) == (21, HEADER_MISMATCH)
    await nothing_leaks(bridge)


async def test_mcp_param_header_names_are_case_insensitive(bridge):
    """Header names are case-insensitive, values are not (MCP 2026-07-28, basic/transports)."""
    headers = modern_headers(bridge, "x", "tools/call", name="forecast", **{"MCP-PARAM-REGION": "eu"})
    body = modern_body("tools/call", 1, {"name": "forecast", "arguments": {"region": "eu"}})
    async with (
        online_app(bridge, "x", {"forecast": echo}, schemas={"forecast": FORECAST_SCHEMA}),
        http_client(bridge) as http,
    ):
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 200
    await nothing_leaks(bridge)


@pytest.mark.parametrize("request_id", ["7", 7, -1.5, "", "null"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_errors_echo_the_request_id_with_its_json_type(bridge, request_id, era):
    """A JSON-RPC error carries the request's id unchanged: a string stays a string, a number a number."""
    if era == "modern":
        body, headers = modern_body("no/such", request_id), modern_headers(bridge, "x", "no/such")
        expected_status = 404
    else:
        body, headers = legacy_body("tools/list", request_id, {"cursor": "x"}), legacy_headers(bridge, "x")
        expected_status = 200
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == expected_status
    answer_id, _ = error_of(response)
    assert answer_id == request_id and type(answer_id) is type(request_id)
    assert json.dumps(request_id) in response.text


# -- docs/protocol.md, Mapping: modern --------------------------------------------------------


async def test_server_discover_describes_the_bridge(bridge):
    """discover: supported revisions, capabilities, instructions, no caching, serverInfo only in _meta."""
    async with (
        online_app(bridge, "x", {"echo": echo}, instructions="Be kind."),
        http_client(bridge) as http,
    ):
        response = await http.post(
            "/mcp",
            json=modern_body("server/discover", "d"),
            headers=modern_headers(bridge, "x", "server/discover"),
        )
    assert response.status_code == 200
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": "d",
        "result": {
            "resultType": "complete",
            "supportedVersions": SUPPORTED,
            "capabilities": {"tools": {"listChanged": True}},
            "instructions": "Be kind.",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {META_SERVER_INFO: {"name": "clientmcp", "version": __version__}},
        },
    }
    await nothing_leaks(bridge)


async def test_modern_tools_list_carries_cache_hints_and_server_info(bridge):
    """tools/list: the tools as declared (unknown members included), ttlMs 0, cacheScope private, serverInfo."""
    declared = {
        "name": "fancy",
        "title": "Fancy",
        "description": "d",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
        "icons": [{"src": "https://example.com/i.png"}],
        "_meta": {"vendor/x": 1},
        "futureMember": {"kept": True},
    }
    members = {k: v for k, v in declared.items() if k not in ("name", "description", "inputSchema")}
    app = app_for(bridge, "x")
    app.expose("fancy", echo, description="d", input_schema=declared["inputSchema"], **members)
    async with app, http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=modern_body("tools/list", 1), headers=modern_headers(bridge, "x", "tools/list")
        )
    assert response.status_code == 200
    assert response.json()["result"] == {
        "resultType": "complete",
        "tools": [declared],
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {META_SERVER_INFO: {"name": "clientmcp", "version": __version__}},
    }
    await nothing_leaks(bridge)


@pytest.mark.parametrize("app_result_type", [None, "input_required", "weird"])
async def test_modern_call_result_gets_result_type_complete_and_no_server_info(bridge, app_result_type):
    """tools/call: the app's result with resultType set to complete by the bridge; its _meta is the app's."""
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": "line1\nline2"}],
        "structuredContent": {"status": "completed"},
        "_meta": {"app/own": 1},
    }
    if app_result_type is not None:
        result["resultType"] = app_result_type

    async def rich(arguments: dict[str, Any]) -> dict[str, Any]:
        return result

    async with online_app(bridge, "x", {"rich": rich}), http_client(bridge) as http:
        response = await http.post(
            "/mcp",
            json=modern_body("tools/call", 1, {"name": "rich"}),
            headers=modern_headers(bridge, "x", "tools/call", name="rich"),
        )
    assert response.status_code == 200
    assert response.json()["result"] == {**result, "resultType": "complete"}
    await nothing_leaks(bridge)
