"""The conformance app: a ClientMCP v1 app serving the diagnostic tools the official MCP conformance suite calls.

Built only on `clientmcp_fast.client.ClientMCP`. The tool names, schemas and results are
the ones `@modelcontextprotocol/conformance` (0.1.16 and 0.2.0-alpha.12) asks of a server
under test (its src/scenarios/server/tools.ts, json-schema-2020-12.ts, http-standard-headers.ts,
stateless.ts; the two custom-header tools are the suite's own mock-server definitions).
Tools a v1 app cannot serve by design (logging, sampling, elicitation, input requests) are
left out on purpose: see tests/conformance/expected-failures-*.yml. `test_tool_with_progress`
reports through this bridge's progress extension (docs/protocol.md, Progress).

Run it by hand against a bridge (then point the suite at /mcp/<agent token>):

    python tests/conformance/conformance_app.py ws://127.0.0.1:8080/connect "$(clientmcp token client conformance)"
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from clientmcp_fast.client import AuthorizeHandler, ClientMCP, text_result

# A 1x1 red pixel PNG, and a WAV holding one silent 16-bit sample at 8 kHz.
RED_PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
SILENT_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA=="

NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}

# json-schema-2020-12: the suite checks that every one of these keywords survives tools/list.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _header_property(kind: str, description: str, header: str) -> dict[str, Any]:
    return {"type": kind, "description": description, "x-mcp-header": header}


# The suite's test_custom_headers tool: every x-mcp-header case of MCP 2026-07-28 in one schema.
# http-custom-header-server-validation picks the first tool with an annotated string property
# (`region`) and fills the other required ones (`priority` with its header, `query` without).
CUSTOM_HEADERS_SCHEMA = {
    "type": "object",
    "properties": {
        "region": _header_property("string", "Plain ASCII string value", "Region"),
        "priority": _header_property("integer", "Integer numeric value", "Priority"),
        "verbose": _header_property("boolean", "Boolean value", "Verbose"),
        "debug": _header_property("boolean", "Boolean true value", "Debug"),
        "empty_val": _header_property("string", "Empty string value", "EmptyVal"),
        "method_val": _header_property("string", 'Value for the header named "Method"', "Method"),
        "float_val": {"type": "number", "description": "Floating point value, not mirrored"},
        "non_ascii_val": _header_property("string", "Non-ASCII string value", "NonAscii"),
        "whitespace_val": _header_property("string", "Leading and trailing whitespace", "Whitespace"),
        "leading_space_val": _header_property("string", "Leading space only", "LeadingSpace"),
        "trailing_space_val": _header_property("string", "Trailing space only", "TrailingSpace"),
        "internal_space_val": _header_property("string", "Internal spaces only", "InternalSpace"),
        "control_char_val": _header_property("string", "Control characters", "ControlChar"),
        "crlf_val": _header_property("string", "Carriage return and line feed", "CrLf"),
        "tab_val": _header_property("string", "Leading tab", "Tab"),
        "query": {"type": "string", "description": "No x-mcp-header annotation"},
    },
    "required": ["region", "priority", "query"],
}

CUSTOM_HEADERS_NULL_SCHEMA = {
    "type": "object",
    "properties": {
        "region": _header_property("string", "Plain ASCII string value", "Region"),
        "priority": _header_property("integer", "Integer numeric value", "Priority"),
        "verbose": _header_property("boolean", "Boolean value, null to test omission", "Verbose"),
        "query": {"type": "string", "description": "No x-mcp-header annotation"},
    },
    "required": ["region", "priority", "query"],
}

SLOW_TEXT_SCHEMA = {
    "type": "object",
    "properties": {
        "seconds": {"type": "number", "description": "how long to wait before answering"},
        "text": {"type": "string", "description": "what to answer with"},
    },
}

DYNAMIC_TOOL = "test_dynamic_tool"


async def simple_text(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result("This is a simple text response for testing.")


async def image_content(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"}]}


async def audio_content(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "audio", "data": SILENT_WAV, "mimeType": "audio/wav"}]}


async def embedded_resource(arguments: dict[str, Any]) -> dict[str, Any]:
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return {"content": [{"type": "resource", "resource": resource}]}


async def multiple_content_types(arguments: dict[str, Any]) -> dict[str, Any]:
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": '{"test":"data","value":123}',
    }
    return {
        "content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": resource},
        ]
    }


async def error_handling(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result("This tool intentionally returns an error for testing", is_error=True)


async def custom_headers(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result("Custom headers test completed")


async def json_schema_tool(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"Received {sorted(arguments)}")


async def slow_text(arguments: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(float(arguments.get("seconds", 2.5)))
    return text_result(str(arguments.get("text", "slow answer")))


async def tool_with_progress(arguments: dict[str, Any], call: Any) -> dict[str, Any]:
    # The suite's steps: 0, 50 and 100 of 100, about 50 ms apart (its tools-call-with-progress).
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await call.report(step, 100)
    return text_result("Progress tool completed")


async def dynamic_tool(arguments: dict[str, Any]) -> dict[str, Any]:
    return text_result("This tool comes and goes with test_trigger_tool_change.")


class ConformanceApp:
    """The ClientMCP app and its diagnostic tools; counts the tool-set changes the suite triggered."""

    def __init__(self, url: str, token: str, on_authorize: AuthorizeHandler | None = None) -> None:
        self.client = ClientMCP(
            url,
            token,
            instructions="Diagnostic tools for the MCP conformance suite.",
            on_authorize=on_authorize,
        )
        self.tool_changes = 0
        # test_simple_text comes first: http-header-validation calls the first listed tool with {}.
        self._expose("test_simple_text", simple_text, "Returns simple text content")
        self._expose("test_image_content", image_content, "Returns a PNG image")
        self._expose("test_audio_content", audio_content, "Returns a WAV audio clip")
        self._expose("test_embedded_resource", embedded_resource, "Returns an embedded text resource")
        self._expose(
            "test_multiple_content_types", multiple_content_types, "Returns text, image and resource"
        )
        self._expose("test_error_handling", error_handling, "Always returns a tool error")
        self._expose(
            "test_custom_headers",
            custom_headers,
            "A tool with x-mcp-header annotations to test custom header mirroring and encoding",
            CUSTOM_HEADERS_SCHEMA,
        )
        self._expose(
            "test_custom_headers_null",
            custom_headers,
            "A tool for testing null/omitted x-mcp-header parameter handling",
            CUSTOM_HEADERS_NULL_SCHEMA,
        )
        self._expose(
            "test_trigger_tool_change",
            self.trigger_tool_change,
            "Changes the tool list (adds or removes test_dynamic_tool) and re-registers",
        )
        self._expose(
            "json_schema_2020_12_tool",
            json_schema_tool,
            "Tool with JSON Schema 2020-12 features",
            JSON_SCHEMA_2020_12,
        )
        self._expose("test_tool_with_progress", tool_with_progress, "Reports progress 0, 50 and 100 of 100")
        self._expose(
            "test_slow_text",
            slow_text,
            "Answers after `seconds` (default 2.5): a streamed call",
            SLOW_TEXT_SCHEMA,
        )

    def _expose(
        self, name: str, handler: Any, description: str, schema: dict[str, Any] | None = None
    ) -> None:
        self.client.expose(name, handler, description=description, input_schema=schema or NO_ARGUMENTS)

    async def trigger_tool_change(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Toggle test_dynamic_tool, so that every call changes the set and the bridge announces it."""
        if DYNAMIC_TOOL in self.client.tools:
            self.client.remove(DYNAMIC_TOOL)
            change = "removed"
        else:
            self._expose(DYNAMIC_TOOL, dynamic_tool, "Present after an odd number of tool-list changes")
            change = "added"
        self.tool_changes += 1
        # expose/remove schedule the register: let it go out, then wait for `registered`,
        # so the bridge has the new set (and has notified the streams) before this result.
        await asyncio.sleep(0)
        await self.client.wait_registered()
        return text_result(f"Tool list changed: {DYNAMIC_TOOL} {change}.")


async def serve(url: str, token: str) -> None:
    """Connect, register and answer calls until the bridge closes the connection for good."""
    app = ConformanceApp(url, token)
    async with app.client:
        print(f"registered {len(app.client.tools)} tools", flush=True)
        await app.client.closed()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: conformance_app.py WS_URL CLIENT_TOKEN")
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
