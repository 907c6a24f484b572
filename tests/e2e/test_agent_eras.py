"""Which era serves a request to `/mcp`, on the wire (docs/protocol.md, Which era serves a request).

The revision named by the body's `_meta`, else by the MCP-Protocol-Version header, else none
(legacy); a mismatch is -32020, an unknown revision -32022. Requests are written by hand
(httpx2) against a real bridge; the app is always `ClientMCP`.
"""

from __future__ import annotations

import pytest
from agents import (
    HEADER_MISMATCH,
    META_VERSION,
    METHOD_NOT_FOUND,
    MODERN,
    SUPPORTED,
    UNSUPPORTED_VERSION,
    echo,
    envelope,
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

pytestmark = pytest.mark.anyio


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
