"""The checks `/mcp` runs before any method, on the wire (ClientMCP v1 §4, §4.5, docs/protocol.md).

The order of checks (Origin, preflight, token, method, Accept, body size, JSON, era), the token
in the path, and Origin and CORS, seen as status codes, JSON-RPC codes and headers. Requests
are written by hand (httpx2, or a bare socket where a library would hide what is checked).
"""

from __future__ import annotations

import json

import pytest
from agents import (
    ACCEPT_BOTH,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MODERN,
    UNSUPPORTED_VERSION,
    RawHttp,
    bearer,
    echo,
    error_of,
    http_client,
    initialize_params,
    legacy_body,
    legacy_headers,
    modern_body,
    modern_headers,
    nothing_leaks,
    online_app,
)
from conftest import make_token

pytestmark = pytest.mark.anyio

PARSE_ERROR = -32700
FOUR_MIB = 4 * 1024 * 1024


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
