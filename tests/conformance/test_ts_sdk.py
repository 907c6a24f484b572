"""The official TypeScript MCP SDKs as agents, run by Node 22 against a real bridge and the conformance app.

- `@modelcontextprotocol/sdk` 1.32 (legacy only: initialize, the GET notification stream);
- `@modelcontextprotocol/client` 2.x with versionNegotiation `auto` (probes server/discover and
  must end modern), pinned to 2026-07-28, and its default `legacy`.
Each script (tests/conformance/ts/) lists, calls, waits for list_changed after the app changes
its tool set, and makes a slow call that the bridge must stream (docs/protocol.md, Call outcomes), then prints
one JSON report that these tests assert on. The agents send the token as a bearer header.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from peers import CLIENT_ID, ROOT, node_fixture, start_app_fixture  # noqa: F401 (fixtures)

from clientmcp_fast import __version__

TS = Path(__file__).resolve().parent / "ts"
MODERN = "2026-07-28"
TOOLS = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_custom_headers",
    "test_custom_headers_null",
    "test_trigger_tool_change",
    "json_schema_2020_12_tool",
    "test_tool_with_progress",
    "test_slow_text",
]
AGENT_TIMEOUT = 120  # seconds for a whole script; each awaited event inside has 30 s


def run_agent(node: Path, script: str, bridge: Any, **env: str) -> dict[str, Any]:
    """Run one agent script against `bridge` and return its report."""
    completed = subprocess.run(
        [str(node), str(TS / script)],
        check=False,
        cwd=ROOT,
        env={
            **os.environ,
            "MCP_URL": bridge.mcp_url,
            "MCP_TOKEN": bridge.token("agent", CLIENT_ID),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    lines = completed.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing; stderr:\n{completed.stderr[-3000:]}"
    report = json.loads(lines[-1])
    assert completed.returncode == 0 and "failed" not in report, report.get(
        "failed", completed.stderr[-3000:]
    )
    return report


def assert_common(report: dict[str, Any], app: Any) -> None:
    """What every agent must see, whatever its era: docs/protocol.md's Mapping and Call outcomes, SDK-side."""
    assert report["serverInfo"] == {"name": "clientmcp", "version": __version__}
    assert report["capabilities"] == {"tools": {"listChanged": True}}
    assert report["instructions"] == "Diagnostic tools for the MCP conformance suite."
    assert report["tools"] == TOOLS  # the app's tools in declared order, one page
    assert report["simpleText"] == ["This is a simple text response for testing."]
    assert report["imageMimeType"] == "image/png"
    assert report["toolError"] == {
        "isError": True,
        "texts": ["This tool intentionally returns an error for testing"],
    }
    assert report["unknownTool"]["code"] == -32602
    assert "Unknown tool: no_such_tool" in report["unknownTool"]["message"]
    # list_changed: the app re-registered with test_dynamic_tool added, and the agent heard of it.
    assert report["trigger"] == ["Tool list changed: test_dynamic_tool added."]
    assert report["listChanged"] is True
    assert report["toolsAfterChange"] == [*TOOLS, "test_dynamic_tool"]
    assert app.app.tool_changes == 1
    # The slow call (2.5 s) outlived the 1 s threshold: an SSE stream of keep-alives, then the result.
    slow = report["slow"]
    assert slow["texts"] == ["streamed"]
    assert slow["status"] == 200
    assert slow["contentType"].startswith("text/event-stream")
    assert slow["keepAlives"] >= 1
    assert slow["events"] == 1
    assert slow["elapsedMs"] >= 2500


@pytest.mark.parametrize("negotiation", ["auto", MODERN])
def test_client_v2_modern(
    node: Path, start_bridge: Callable[..., Any], start_app: Callable[..., Any], negotiation: str
) -> None:
    """@modelcontextprotocol/client 2.x, auto or pinned: ends at 2026-07-28, listens, mirrors Mcp-Param headers."""
    bridge = start_bridge()
    app = start_app(bridge)

    report = run_agent(node, "agent_client_v2.mjs", bridge, NEGOTIATION=negotiation)

    assert report["sdk"].startswith("@modelcontextprotocol/client@2.")
    assert report["protocolVersion"] == MODERN
    assert_common(report, app)
    # Modern: server/discover first (auto probes, pinned checks its version is offered), never initialize.
    assert report["rpcMethods"][0] == "server/discover"
    assert "initialize" not in report["rpcMethods"]
    assert report["honoredFilter"] == {"toolsListChanged": True}
    assert report["subscriptionClosed"] == "local"
    # x-mcp-header: the SDK sent Mcp-Param-* (base64 for non-ASCII) and the bridge accepted them.
    headers = report["customHeaders"]
    assert headers["status"] == 200 and headers["isError"] is False
    assert headers["texts"] == ["Custom headers test completed"]
    assert headers["sent"]["mcp-param-region"] == "=?base64?WsO8cmljaA==?="
    assert headers["sent"]["mcp-param-priority"] == "7"
    assert headers["sent"]["mcp-param-verbose"] == "true"
    assert "mcp-param-query" not in headers["sent"]
    app.stop()
    bridge.assert_nothing_leaks()


def test_client_v2_default_negotiation_is_legacy(
    node: Path, start_bridge: Callable[..., Any], start_app: Callable[..., Any]
) -> None:
    """@modelcontextprotocol/client 2.x by default: the initialize handshake, 2025-11-25, the GET stream."""
    bridge = start_bridge()
    app = start_app(bridge)

    report = run_agent(node, "agent_client_v2.mjs", bridge, NEGOTIATION="legacy")

    assert report["protocolVersion"] == "2025-11-25"
    assert_common(report, app)
    assert report["rpcMethods"][0] == "initialize"
    assert "server/discover" not in report["rpcMethods"]
    # Legacy Streamable HTTP has no Mcp-Param headers; the call still reaches the app.
    assert report["customHeaders"]["texts"] == ["Custom headers test completed"]
    app.stop()
    bridge.assert_nothing_leaks()


def test_sdk_v1_legacy(node: Path, start_bridge: Callable[..., Any], start_app: Callable[..., Any]) -> None:
    """@modelcontextprotocol/sdk 1.32: initialize at 2025-11-25 with a session id, the GET stream, list_changed."""
    bridge = start_bridge()
    app = start_app(bridge)

    report = run_agent(node, "agent_sdk_v1.mjs", bridge)

    assert report["sdk"].startswith("@modelcontextprotocol/sdk@1.32.")
    assert report["protocolVersion"] == "2025-11-25"
    assert isinstance(report["sessionId"], str) and report["sessionId"]
    assert report["getStream"] == {"status": 200, "contentType": "text/event-stream"}
    assert_common(report, app)
    app.stop()
    bridge.assert_nothing_leaks()
