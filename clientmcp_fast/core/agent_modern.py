"""Requests of MCP 2026-07-28: the modern ladder of checks, then its methods (docs/protocol.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import UNSET

from clientmcp_fast.core.agent_checks import header_text, named_tool
from clientmcp_fast.core.agent_context import Context
from clientmcp_fast.core.agent_eras import MODERN_LIST_TAIL, SUPPORTED
from clientmcp_fast.core.agent_streams import ListenStream
from clientmcp_fast.core.agent_tools import instructions, tools_call, tools_list
from clientmcp_fast.core.http import MCP_METHOD, MCP_NAME
from clientmcp_fast.core.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CAPABILITIES,
    META_VERSION,
    METHOD_NOT_FOUND,
    NULL_ID,
    Message,
    Meta,
    Params,
    encode_json,
    valid_id,
    wants_tool_changes,
)
from clientmcp_fast.speedups import jsonrpc_result

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge

_CAPABILITIES = b'{"tools":{"listChanged":true}}'
_ROUTING_HEADERS = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
# The usual values of Mcp-Method, as sent and as text (see header_text).
_HEADER_METHODS = {
    method.encode(): method
    for method in ("tools/call", "tools/list", "server/discover", "subscriptions/listen")
}


def serve_modern(
    bridge: Bridge, name_cache: dict[bytes, str | None], context: Context, message: Message, params: Params,
    meta: object, header_version: str | None, body_version: str | None, now: float,
) -> None:  # fmt: skip
    """A 2026-07-28 request; the versions are those `_route` read (the header's trimmed, the body's if a string).

    `name_cache` remembers what each Mcp-Name value says (see `agent_checks.named_tool`).
    """
    raw_id = message.id
    id_json = valid_id(raw_id)
    method = message.method
    bridge.counters.request(True, method)
    if raw_id is UNSET and isinstance(method, str):
        context.accepted()  # notifications are accepted and ignored (docs/protocol.md)
        return
    if id_json is None or message.jsonrpc != "2.0" or not isinstance(method, str):
        id_json = NULL_ID if id_json is None else id_json
        context.fail(
            400,
            id_json,
            INVALID_REQUEST,
            "Invalid Request: one JSON-RPC request with a string or number id",
        )
        return
    if type(meta) is not Meta or meta.protocolVersion is UNSET or meta.clientCapabilities is UNSET:
        context.fail(
            400,
            id_json,
            INVALID_PARAMS,
            f"params._meta must carry {META_VERSION} and {META_CAPABILITIES}",
        )
        return
    request = context.exchange.request
    repeated = request.repeated
    if repeated:
        for name in _ROUTING_HEADERS:
            if name in repeated:
                context.fail(400, id_json, HEADER_MISMATCH, f"{name.decode()} header appears more than once")
                return
    if header_version is None or header_version != body_version:
        context.fail(
            400,
            id_json,
            HEADER_MISMATCH,
            "MCP-Protocol-Version header does not match params._meta protocolVersion",
        )
        return
    mcp_method = request.header(MCP_METHOD)
    if mcp_method is None or header_text(mcp_method, _HEADER_METHODS) != method:
        context.fail(400, id_json, HEADER_MISMATCH, "Mcp-Method header does not match the method")
        return
    if method == "tools/call":
        name = params.name
        if named_tool(name_cache, request.header(MCP_NAME)) != name:
            context.fail(400, id_json, HEADER_MISMATCH, "Mcp-Name header does not match params.name")
            return
        # Mcp-Param-* headers are checked there, against the tool's annotations.
        tools_call(bridge, context, id_json, name, params, meta, True, None, now)
    elif method == "tools/list":
        tools_list(bridge, context, id_json, params, True)
    elif method == "server/discover":
        _discover(bridge, context, id_json)
    elif method == "subscriptions/listen":
        _listen(bridge, context, id_json, params, now)
    else:
        context.fail(404, id_json, METHOD_NOT_FOUND, f"Method not found: {method}")


def _discover(bridge: Bridge, context: Context, id_json: bytes) -> None:
    body = b'{"resultType":"complete","supportedVersions":' + encode_json(SUPPORTED)
    body += b',"capabilities":' + _CAPABILITIES
    text = instructions(bridge, context.client_id)
    if text is not None:
        body += b',"instructions":' + encode_json(text)
    context.reply(jsonrpc_result(id_json, body + MODERN_LIST_TAIL))


def _listen(bridge: Bridge, context: Context, id_json: bytes, params: Params, now: float) -> None:
    if not context.wants_stream:
        context.fail(
            406, id_json, INVALID_REQUEST, "Not Acceptable: subscriptions/listen needs text/event-stream"
        )
        return
    stream = ListenStream(context.exchange, id_json, wants_tool_changes(params.notifications))
    if context.open_stream(bridge, stream, id_json, now):
        stream.acknowledge()
