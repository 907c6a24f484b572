"""The agent endpoint `/mcp` on the wire, request by request, against a real bridge (ClientMCP v1 §4, docs/protocol.md).

Requests are written by hand (httpx2, or a bare socket where a library would hide what is
checked), so that every rule of docs/protocol.md's Agent endpoint (which era, the order of
checks, mapping, call outcomes, notification streams, Origin and CORS) is seen as status
codes, JSON-RPC codes, ids and headers. The app is always `ClientMCP`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import (
    ACCEPT_BOTH,
    LIST_CHANGED,
    META_CAPABILITIES,
    META_SERVER_INFO,
    META_SUBSCRIPTION,
    META_VERSION,
    MODERN,
    REQUEST_CANCELLED,
    SUPPORTED,
    WAIT,
    HeldTool,
    RawHttp,
    SleepyTool,
    app_for,
    bearer,
    envelope,
    error_of,
    eventually,
    http_client,
    initialize_params,
    legacy_body,
    legacy_headers,
    legacy_session,
    modern_body,
    modern_headers,
    nothing_leaks,
    online_app,
    stop_bridge,
    wait_registered,
)
from conftest import make_token

from clientmcp_fast import __version__

pytestmark = pytest.mark.anyio

HEADER_MISMATCH = -32020
UNSUPPORTED_VERSION = -32022
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
PARSE_ERROR = -32700
FOUR_MIB = 4 * 1024 * 1024

FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "days": {"type": "integer", "x-mcp-header": "Days"},
        "detail": {"type": "boolean", "x-mcp-header": "Detail"},
    },
}


async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(arguments, sort_keys=True)}]}


async def noop(arguments: dict[str, Any]) -> str:
    return "ok"


def text_result(response: Any) -> str:
    body = response.json()
    assert "error" not in body, body
    return body["result"]["content"][0]["text"]


# -- docs/protocol.md, Which era serves a request ---------------------------------------------


async def test_no_revision_named_is_legacy(bridge):
    """Neither _meta nor header: served as legacy (no resultType, no cache hints)."""
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=legacy_body("tools/list", 3), headers=legacy_headers(bridge, "x")
        )
        assert response.status_code == 200
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
        }
    await nothing_leaks(bridge)


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
@pytest.mark.parametrize("where", ["header", "meta"])
async def test_a_legacy_revision_named_is_legacy(bridge, version, where):
    """A legacy revision named by the header or by the body's _meta is served as legacy."""
    headers = legacy_headers(bridge, "x")
    body = legacy_body("tools/list", "a")
    if where == "header":
        headers["MCP-Protocol-Version"] = version
    else:
        body["params"] = {"_meta": {META_VERSION: version}}
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": "a", "result": {"tools": []}}


async def test_modern_revision_is_served_statelessly(bridge):
    """2026-07-28 named in both places: a modern answer (resultType, cache hints)."""
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=modern_body("tools/list", 4), headers=modern_headers(bridge, "x", "tools/list")
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["tools"] == []
    assert "mcp-session-id" not in response.headers


@pytest.mark.parametrize(
    ("meta_version", "header_version"),
    [(MODERN, "2025-11-25"), ("2025-06-18", "2025-11-25"), ("2025-11-25", MODERN), ("v999.0.0", MODERN)],
)
async def test_meta_and_header_naming_different_revisions_is_a_header_mismatch(
    bridge, meta_version, header_version
):
    """Body _meta and MCP-Protocol-Version both present and different: 400 -32020, id echoed."""
    body = modern_body("tools/list", "r-1")
    body["params"]["_meta"][META_VERSION] = meta_version
    headers = modern_headers(bridge, "x", "tools/list", **{"MCP-Protocol-Version": header_version})
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 400
    assert error_of(response) == ("r-1", HEADER_MISMATCH)


@pytest.mark.parametrize("version", ["2099-01-01", "2024-11-05", "v999.0.0", "2026-07-29"])
@pytest.mark.parametrize("where", ["header", "meta", "both"])
async def test_an_unknown_revision_is_unsupported(bridge, version, where):
    """Any other revision: 400 -32022 listing exactly the supported ones and echoing the requested one."""
    headers = legacy_headers(bridge, "x", **{"Mcp-Method": "tools/list"})
    body = legacy_body("tools/list", 9)
    if where in ("header", "both"):
        headers["MCP-Protocol-Version"] = version
    if where in ("meta", "both"):
        body["params"] = {"_meta": {**envelope(), META_VERSION: version}}
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] == 9
    assert answer["error"]["code"] == UNSUPPORTED_VERSION
    assert answer["error"]["data"] == {"supported": SUPPORTED, "requested": version}


async def test_initialize_is_legacy_unless_a_modern_revision_is_named(bridge):
    """initialize without a modern revision is the legacy handshake; with a modern _meta it is 404 -32601."""
    params = initialize_params("2025-06-18")
    async with http_client(bridge) as http:
        legacy = await http.post(
            "/mcp", json=legacy_body("initialize", 1, params), headers=legacy_headers(bridge, "x")
        )
        assert legacy.status_code == 200
        assert legacy.json()["result"]["protocolVersion"] == "2025-06-18"
        modern = await http.post(
            "/mcp",
            json=modern_body("initialize", 2, params),
            headers=modern_headers(bridge, "x", "initialize"),
        )
        assert modern.status_code == 404
        assert error_of(modern) == (2, METHOD_NOT_FOUND)


# -- docs/protocol.md, Which era serves a request: the order of checks ------------------------


async def test_origin_is_checked_before_the_token(bridge):
    """A foreign Origin is 403 even without a token, and even for a preflight."""
    async with http_client(bridge) as http:
        post = await http.post("/mcp", json=legacy_body("ping"), headers={"Origin": "https://evil.example"})
        assert post.status_code == 403
        preflight = await http.options(
            "/mcp", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 403
        assert "access-control-allow-origin" not in preflight.headers


async def test_preflight_is_answered_without_a_token(bridge):
    """An OPTIONS preflight from an allowed origin needs no token."""
    async with http_client(bridge) as http:
        response = await http.options(
            "/mcp", headers={"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST"}
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "http://localhost:5173"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        "Bearer not-a-jwt",
        "Basic dXNlcjpwYXNz",
        "Bearer {expired}",
        "Bearer {client_role}",
        "Bearer {foreign_secret}",
    ],
)
async def test_missing_or_invalid_token_is_401_with_a_bearer_challenge(bridge, authorization):
    """No valid agent token: 401 and WWW-Authenticate: Bearer (ClientMCP v1 §4), whatever the method."""
    tokens = {
        "expired": make_token("agent", "x", ttl=-120),
        "client_role": make_token("client", "x"),
        "foreign_secret": make_token("agent", "x", secret=b"another-secret-0123456789abcdef-0123456789"),
    }
    headers = {} if authorization is None else {"Authorization": authorization.format(**tokens)}
    async with http_client(bridge) as http:
        for method in ("POST", "GET", "DELETE", "PUT"):
            response = await http.request(method, "/mcp", json=legacy_body("ping"), headers=headers)
            assert response.status_code == 401, method
            assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH"])
async def test_methods_other_than_post_and_get_are_405(bridge, method):
    """DELETE (no sessions to end) and other methods: 405, checked before Accept."""
    headers = {**bearer(bridge, "x"), "Accept": "text/html", "Mcp-Session-Id": "abc"}
    async with http_client(bridge) as http:
        response = await http.request(method, "/mcp", headers=headers)
    assert response.status_code == 405


async def test_get_naming_the_modern_revision_is_405(bridge):
    """2026-07-28 has no GET stream."""
    headers = {**bearer(bridge, "x"), "Accept": "text/event-stream", "MCP-Protocol-Version": MODERN}
    async with http_client(bridge) as http:
        response = await http.get("/mcp", headers=headers)
    assert response.status_code == 405
    assert bridge.call(lambda s: s.bridge.stream_count) == 0


@pytest.mark.parametrize("accept", ["text/html", "image/png, text/plain", "application/json;q=0, text/*;q=0"])
async def test_accept_naming_neither_json_nor_sse_is_406(bridge, accept):
    """406 only when neither JSON nor SSE is acceptable."""
    headers = {**legacy_headers(bridge, "x"), "Accept": accept}
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=legacy_body("ping"), headers=headers)
    assert response.status_code == 406


async def test_missing_accept_counts_as_anything(bridge):
    """A POST without any Accept header is served, as JSON."""
    with await RawHttp.open(bridge) as raw:
        raw.send(
            "POST",
            "/mcp",
            {**bearer(bridge, "x"), "Content-Type": "application/json"},
            legacy_body("ping", 5),
        )
        response = await raw.head()
        assert response.status == 200
        assert response.headers["content-type"] == "application/json"
        assert json.loads(await raw.body(response)) == {"jsonrpc": "2.0", "id": 5, "result": {}}


async def test_answers_are_sse_only_when_json_is_not_accepted(bridge):
    """Accept naming only text/event-stream gets the answer as one SSE event."""
    with await RawHttp.open(bridge) as raw:
        raw.send(
            "POST", "/mcp", {**bearer(bridge, "x"), "Accept": "text/event-stream"}, legacy_body("ping", "p")
        )
        response = await raw.head()
        assert response.status == 200
        assert response.headers["content-type"] == "text/event-stream"
        if "content-length" in response.headers:
            body = (await raw.body(response)).decode()
            assert body == 'event: message\ndata: {"jsonrpc":"2.0","id":"p","result":{}}\n\n'
        else:
            assert await raw.sse_item() == ("message", {"jsonrpc": "2.0", "id": "p", "result": {}})
            assert await raw.sse_item() is None


async def test_listen_needs_sse_in_accept(bridge):
    """subscriptions/listen with an Accept that does not name text/event-stream: 406, no stream opened."""
    headers = modern_headers(bridge, "x", "subscriptions/listen", Accept="application/json")
    body = modern_body("subscriptions/listen", 1, {"notifications": {"toolsListChanged": True}})
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == 406
    assert bridge.call(lambda s: s.bridge.stream_count) == 0


async def test_body_over_4_mib_is_413_with_a_json_rpc_error(bridge):
    """A Content-Length over 4 MiB is refused before the body is read."""
    with await RawHttp.open(bridge) as raw:
        raw.send(
            "POST",
            "/mcp",
            {**legacy_headers(bridge, "x"), "Content-Length": str(FOUR_MIB + 1)},
        )
        response = await raw.head()
        assert response.status == 413
        answer = json.loads(await raw.body(response))
        assert answer["jsonrpc"] == "2.0" and answer["id"] is None and "code" in answer["error"]


async def test_chunked_body_over_4_mib_is_413(bridge):
    """A chunked body that grows past 4 MiB is refused too."""
    with await RawHttp.open(bridge) as raw:
        head = "".join(f"{k}: {v}\r\n" for k, v in legacy_headers(bridge, "x").items())
        piece = b" " * (1024 * 1024)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(5))
        raw.writer.write(
            f"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode()
            + chunks
            + b"0\r\n\r\n"
        )
        response = await raw.head()
        assert response.status == 413


async def test_body_of_exactly_4_mib_is_read(bridge):
    """4 MiB is the limit itself, not over it."""
    body = json.dumps(legacy_body("ping", 1)).encode()
    body += b" " * (FOUR_MIB - len(body))
    async with http_client(bridge) as http:
        response = await http.post("/mcp", content=body, headers=legacy_headers(bridge, "x"))
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(
    "body", [b"{bad", b"", b'{"jsonrpc":"2.0","id":1,', b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000]
)
async def test_a_body_that_is_not_json_is_a_parse_error_with_null_id(bridge, body):
    """-32700 with id null, before the era is looked at (an unknown revision header changes nothing)."""
    headers = legacy_headers(bridge, "x", **{"MCP-Protocol-Version": "2099-01-01"})
    async with http_client(bridge) as http:
        response = await http.post("/mcp", content=body, headers=headers)
    assert response.status_code == 400
    assert error_of(response) == (None, PARSE_ERROR)


@pytest.mark.parametrize(
    ("case", "status", "code"),
    [
        ("origin before token", 403, None),
        ("token before method", 401, None),
        ("method before accept", 405, None),
        ("accept before size", 406, None),
        ("size before json", 413, None),
        ("json before era", 400, PARSE_ERROR),
        ("era before modern ladder", 400, UNSUPPORTED_VERSION),
        ("meta before headers", 400, INVALID_PARAMS),
        ("headers before dispatch", 400, HEADER_MISMATCH),
    ],
)
async def test_checks_run_in_the_documented_order(bridge, case, status, code):
    """Each pair of checks in docs/protocol.md's order: the request fails both, the earlier one answers."""
    token = bearer(bridge, "x")
    target, method, headers, body = (
        "/mcp",
        "POST",
        {**token, "Accept": ACCEPT_BOTH},
        b'{"jsonrpc":"2.0","id":1}',
    )
    if case == "origin before token":
        headers = {"Origin": "https://evil.example"}
    elif case == "token before method":
        method, headers = "DELETE", {}
    elif case == "method before accept":
        method, headers["Accept"] = "DELETE", "text/html"
    elif case == "accept before size":
        headers.update({"Accept": "text/html", "Content-Length": str(FOUR_MIB + 1)})
        body = b""
    elif case == "size before json":
        headers["Content-Length"] = str(FOUR_MIB + 1)
        body = b""
    elif case == "json before era":
        headers["MCP-Protocol-Version"] = "2099-01-01"
        body = b"{bad"
    elif case == "era before modern ladder":
        headers["MCP-Protocol-Version"] = "2099-01-01"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    elif case == "meta before headers":
        headers["MCP-Protocol-Version"] = MODERN  # and no Mcp-Method either
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    elif case == "headers before dispatch":
        headers["MCP-Protocol-Version"] = MODERN  # no Mcp-Method, and an unknown method
        body = json.dumps(modern_body("no/such/method")).encode()
    with await RawHttp.open(bridge) as raw:
        raw.send(method, target, headers, body)
        response = await raw.head()
        assert response.status == status
        answer = await raw.body(response)
        if code is not None:
            assert json.loads(answer)["error"]["code"] == code


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
async def test_unknown_tool_is_invalid_params_naming_it(bridge, era, status):
    """A tool not in the latest register (app online): -32602 "Unknown tool: NAME"."""
    if era == "modern":
        body = modern_body("tools/call", 1, {"name": "nope", "arguments": {}})
        headers = modern_headers(bridge, "x", "tools/call", name="nope")
    else:
        body, headers = (
            legacy_body("tools/call", 1, {"name": "nope", "arguments": {}}),
            legacy_headers(bridge, "x"),
        )
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        response = await http.post("/mcp", json=body, headers=headers)
    assert response.status_code == status
    assert response.json()["error"] == {"code": INVALID_PARAMS, "message": "Unknown tool: nope"}
    await nothing_leaks(bridge)


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


# -- ClientMCP v1 §4.3, docs/protocol.md, Call outcomes: streaming slow calls -----------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_slow_call_is_streamed_with_keep_alives_then_one_message(bridge, era):
    """Not done within 1 s and SSE accepted: `: keep-alive` every second, then the only message event."""
    slow = SleepyTool(
        2.5, result={"content": [{"type": "text", "text": "a\nb"}], "structuredContent": {"k": "v\n"}}
    )
    if era == "modern":
        headers = modern_headers(bridge, "x", "tools/call", name="slow")
        body = modern_body("tools/call", 31, {"name": "slow"})
    else:
        headers, body = legacy_headers(bridge, "x"), legacy_body("tools/call", 31, {"name": "slow"})
    async with online_app(bridge, "x", {"slow": slow}):
        with await RawHttp.open(bridge) as raw:
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
    await nothing_leaks(bridge)


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


async def test_slow_call_is_plain_json_when_sse_is_not_accepted(bridge):
    """Accept: application/json only: the slow answer comes as one JSON body, however long it takes."""
    slow = SleepyTool(1.5)
    headers = {**legacy_headers(bridge, "x"), "Accept": "application/json"}
    async with online_app(bridge, "x", {"slow": slow}), http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=legacy_body("tools/call", 1, {"name": "slow"}), headers=headers
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert text_result(response) == "slept"
    await nothing_leaks(bridge)


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
async def test_legacy_notifications_cancelled_sends_cancel_and_ends_the_json_answer(bridge, with_session):
    """notifications/cancelled naming a call of the same session: `cancel` to the app, -32800 to the agent."""
    held = HeldTool()
    async with online_app(bridge, "x", {"held": held}) as app, http_client(bridge) as http:
        session = {"Mcp-Session-Id": await legacy_session(http, bridge)} if with_session else {}
        with await RawHttp.open(bridge) as raw:
            headers = {**legacy_headers(bridge, "x", **session), "Accept": "application/json"}
            raw.send("POST", "/mcp", headers, legacy_body("tools/call", 1, {"name": "held"}))
            await asyncio.wait_for(held.started.wait(), WAIT)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            notified = await http.post("/mcp", json=cancel, headers=legacy_headers(bridge, "x", **session))
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
    await nothing_leaks(bridge)


async def test_legacy_notifications_cancelled_ends_a_streamed_answer_without_an_event(bridge):
    """A call already streaming: the cancel closes the stream with no message event."""
    held = HeldTool()
    async with online_app(bridge, "x", {"held": held}) as app, http_client(bridge) as http:
        session = await legacy_session(http, bridge)
        with await RawHttp.open(bridge) as raw:
            raw.send(
                "POST",
                "/mcp",
                legacy_headers(bridge, "x", **{"Mcp-Session-Id": session}),
                legacy_body("tools/call", "c1", {"name": "held"}),
            )
            response = await raw.head()  # streaming starts after 1 s
            assert response.headers["content-type"] == "text/event-stream"
            assert await raw.sse_item() == ("comment", "keep-alive")
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c1"}}
            notified = await http.post(
                "/mcp", json=cancel, headers=legacy_headers(bridge, "x", **{"Mcp-Session-Id": session})
            )
            assert notified.status_code == 202
            while (item := await raw.sse_item()) is not None:
                assert item == ("comment", "keep-alive")
            await asyncio.wait_for(held.cancelled.wait(), WAIT)
            assert app.calls_cancelled == 1
    await nothing_leaks(bridge)


@pytest.mark.parametrize(
    ("cancel_id", "cancel_session"),
    [("1", "same"), (1, "other"), (1, "none"), (2, "same")],
    ids=["id-as-string", "other-session", "no-session", "other-id"],
)
async def test_legacy_notifications_cancelled_must_name_the_call_exactly(bridge, cancel_id, cancel_session):
    """Same id with its JSON type, same session: anything else cancels nothing and the call completes."""
    held = HeldTool(result="finished")
    async with online_app(bridge, "x", {"held": held}) as app, http_client(bridge) as http:
        session = await legacy_session(http, bridge)
        with await RawHttp.open(bridge) as raw:
            headers = {
                **legacy_headers(bridge, "x", **{"Mcp-Session-Id": session}),
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
                "/mcp", json=cancel, headers=legacy_headers(bridge, "x", **named[cancel_session])
            )
            assert notified.status_code == 202
            held.release.set()
            response = await raw.head()
            answer = json.loads(await raw.body(response))
            assert answer["result"]["content"][0]["text"] == "finished"
            assert not held.cancelled.is_set()
            assert app.calls_cancelled == 0
    await nothing_leaks(bridge)


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("when", ["before streaming", "while streaming"])
async def test_agent_hanging_up_mid_call_cancels_it(bridge, era, when):
    """The agent closing its connection is a cancel in both eras (docs/protocol.md, Mapping)."""
    held = HeldTool()
    if era == "modern":
        headers = modern_headers(bridge, "x", "tools/call", name="held")
        body = modern_body("tools/call", 1, {"name": "held"})
    else:
        headers, body = legacy_headers(bridge, "x"), legacy_body("tools/call", 1, {"name": "held"})
    async with online_app(bridge, "x", {"held": held}) as app:
        raw = await RawHttp.open(bridge)
        raw.send("POST", "/mcp", headers, body)
        await asyncio.wait_for(held.started.wait(), WAIT)
        if when == "while streaming":
            await raw.head()
            assert await raw.sse_item() == ("comment", "keep-alive")
        raw.close()
        await asyncio.wait_for(held.cancelled.wait(), WAIT)
        assert app.calls_cancelled == 1
    await nothing_leaks(bridge)


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


# -- ClientMCP v1 §4: the token in the path ---------------------------------------------------


async def test_token_in_the_path_is_accepted(bridge):
    async with online_app(bridge, "x", {"echo": echo}), http_client(bridge) as http:
        token = bridge.token("agent", "x")
        response = await http.post(
            f"/mcp/{token}", json=legacy_body("tools/list", 1), headers={"Accept": ACCEPT_BOTH}
        )
        assert response.status_code == 200
        assert [t["name"] for t in response.json()["result"]["tools"]] == ["echo"]
        wrong_role = await http.post(f"/mcp/{bridge.token('client', 'x')}", json=legacy_body("ping"))
        assert wrong_role.status_code == 401
    await nothing_leaks(bridge)


async def test_header_token_wins_over_path_token(bridge):
    """Both given: the header selects the client ID, and a bad header is not rescued by the path."""
    async with (
        online_app(bridge, "x", {"x_tool": echo}),
        online_app(bridge, "y", {"y_tool": echo}),
        http_client(bridge) as http,
    ):
        path = f"/mcp/{bridge.token('agent', 'y')}"
        response = await http.post(
            path, json=legacy_body("tools/list", 1), headers=legacy_headers(bridge, "x")
        )
        assert [t["name"] for t in response.json()["result"]["tools"]] == ["x_tool"]
        response = await http.post(
            path, json=legacy_body("tools/list", 1), headers={"Authorization": "Bearer junk"}
        )
        assert response.status_code == 401
    await nothing_leaks(bridge)


# -- ClientMCP v1 §4.5, docs/protocol.md, Origin and CORS -------------------------------------


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost", True),
        ("http://localhost:3000", True),
        ("https://127.0.0.1:8443", True),
        ("http://[::1]:8080", True),
        ("http://localhost.evil.example", False),
        ("https://app.example.com", False),
        ("null", False),
    ],
)
async def test_default_allow_list_is_loopback_origins(bridge, origin, allowed):
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=legacy_body("ping"), headers={**legacy_headers(bridge, "x"), "Origin": origin}
        )
    assert response.status_code == (200 if allowed else 403)


async def test_requests_without_origin_are_served(start_bridge):
    """Agents are rarely browsers: no Origin is served, even when the allow-list is empty."""
    bridge = start_bridge(allowed_origins=())
    async with http_client(bridge) as http:
        response = await http.post("/mcp", json=legacy_body("ping"), headers=legacy_headers(bridge, "x"))
        assert response.status_code == 200
        assert "access-control-allow-origin" not in response.headers


@pytest.mark.parametrize("origin", ["http://localhost:3000", "https://app.example.com", "http://127.0.0.1"])
async def test_empty_allow_list_refuses_every_origin(start_bridge, origin):
    bridge = start_bridge(allowed_origins=())
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp", json=legacy_body("ping"), headers={**legacy_headers(bridge, "x"), "Origin": origin}
        )
        assert response.status_code == 403
        preflight = await http.options(
            "/mcp", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 403


async def test_preflight_from_an_allowed_origin(start_bridge):
    """204 with the origin itself, the methods, the requested headers echoed (Authorization named), Max-Age."""
    bridge = start_bridge(allowed_origins=("https://app.example.com",))
    requested = "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region"
    async with http_client(bridge) as http:
        response = await http.options(
            "/mcp",
            headers={
                "Origin": "https://app.example.com",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": requested,
            },
        )
        assert response.status_code == 204
        headers = response.headers
        assert headers["access-control-allow-origin"] == "https://app.example.com"
        assert headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
        allowed = [name.strip().lower() for name in headers["access-control-allow-headers"].split(",")]
        assert allowed == [name.strip() for name in requested.split(",")]
        assert "*" not in headers["access-control-allow-headers"]
        assert int(headers["access-control-max-age"]) > 0
        assert "origin" in headers["vary"].lower()
        other = await http.options(
            "/mcp", headers={"Origin": "https://other.example.com", "Access-Control-Request-Method": "POST"}
        )
        assert other.status_code == 403
        loopback = await http.options(
            "/mcp", headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
        )
        assert loopback.status_code == 403  # a configured list replaces the loopback default


@pytest.mark.parametrize("authorized", [True, False])
async def test_responses_to_an_allowed_origin_carry_cors_headers(start_bridge, authorized):
    """Every answer to an allowed origin (a 401 included) names it, varies on Origin, exposes our headers."""
    bridge = start_bridge(allowed_origins=("https://app.example.com",))
    headers = legacy_headers(bridge, "x") if authorized else {"Accept": ACCEPT_BOTH}
    params = initialize_params()
    async with http_client(bridge) as http:
        response = await http.post(
            "/mcp",
            json=legacy_body("initialize", 1, params),
            headers={**headers, "Origin": "https://app.example.com"},
        )
    assert response.status_code == (200 if authorized else 401)
    assert response.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "origin" in response.headers["vary"].lower()
    exposed = {name.strip().lower() for name in response.headers["access-control-expose-headers"].split(",")}
    assert {"mcp-session-id", "www-authenticate"} <= exposed
