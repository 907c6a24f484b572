"""The agent endpoint: MCP Streamable HTTP in both eras, answered from the bridge (ClientMCP v1 §4, docs/protocol.md).

`AgentEndpoint.handle()` runs the checks of docs/protocol.md in their order (Origin, preflight,
token, method, Accept, body size, JSON, era), and `_route` hands the request to its era:
`agent_modern.serve_modern` runs the modern ladder (`_meta`, routing headers, `Mcp-Param-*`,
method), `agent_legacy` serves legacy requests and batches. Every request stands alone: the
only state kept is the memos of header values (agent_checks).

The other modules of the endpoint: agent_checks (Origin and CORS, the token, Accept, header
values), agent_context (`Context`: one request being answered), agent_tools (tools/list and
tools/call, both eras), agent_streams (the notification streams), agent_eras (the revisions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.agent_checks import (
    ALLOW,
    authenticate,
    bearer_token,
    cors_headers,
    header_text,
    media_accepted,
    origin_allowed,
    over_rate,
    preflight,
)
from clientmcp_fast.core.agent_context import JSON_HEADERS, Context
from clientmcp_fast.core.agent_eras import LEGACY, MODERN, SUPPORTED
from clientmcp_fast.core.agent_legacy import serve_batch, serve_legacy
from clientmcp_fast.core.agent_modern import serve_modern
from clientmcp_fast.core.agent_streams import LegacyStream
from clientmcp_fast.core.counters import REFUSED_RATE
from clientmcp_fast.core.http import (
    ACCEPT,
    AUTHORIZATION,
    MCP_PROTOCOL_VERSION,
    ORIGIN,
    Exchange,
    Headers,
    Request,
)
from clientmcp_fast.core.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    NULL_ID,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    Message,
    Meta,
    TooManyElements,
    decode_body,
    valid_id,
)
from clientmcp_fast.core.tokens import ROLE_AGENT, Grant, TokenError, TokenVerifier
from clientmcp_fast.core.websocket import valid_utf8

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge

# The usual values of MCP-Protocol-Version, as sent and as text (see header_text).
_HEADER_VERSIONS = {version.encode(): version for version in SUPPORTED}


class AgentEndpoint:
    """Serves `/mcp` and `/mcp/<token>`: each request checked, routed to its era, and answered."""

    __slots__ = (
        "bridge",
        "verifier",
        "allowed_origins",
        "_accept_cache",
        "_bearer_cache",
        "_name_cache",
        "agent_rate",
    )

    def __init__(
        self, bridge: Bridge, verifier: TokenVerifier, allowed_origins: tuple[str, ...] | None
    ) -> None:
        self.bridge = bridge
        self.verifier = verifier
        self.allowed_origins = None if allowed_origins is None else {o.lower() for o in allowed_origins}
        self._accept_cache: dict[bytes | None, tuple[bool, bool, bool]] = {}
        # An agent sends the same Authorization header with every request, and names the same
        # tools in Mcp-Name again and again: each value is read once (see agent_checks.remember_value).
        self._bearer_cache: dict[bytes, bytes] = {}
        self._name_cache: dict[bytes, str | None] = {}
        self.agent_rate = float(bridge.limits.agent_rate)  # requests a second per agent token; 0: off

    # -- the order of checks (docs/protocol.md, Which era serves a request) -----------------

    def handle(self, exchange: Exchange, path_token: bytes, now: float) -> None:
        """Answer one HTTP request to the agent endpoint."""
        request = exchange.request
        origin = request.header(ORIGIN)
        cors: Headers = ()
        if origin is not None:
            if not origin_allowed(self.allowed_origins, origin):
                exchange.respond(
                    403,
                    JSON_HEADERS,
                    jsonrpc.error(NULL_ID, INVALID_REQUEST, "Forbidden: Origin not allowed"),
                )
                return
            cors = cors_headers(origin)
        method = request.method
        if method == b"OPTIONS":
            preflight(exchange, origin, cors)
            return
        grant = authenticate(
            self.verifier,
            self._bearer_cache,
            exchange,
            request.header(AUTHORIZATION),
            path_token,
            cors,
            now,
            self.bridge.events,
        )
        if grant is None:
            return
        self._serve(exchange, request, grant, cors, now)

    def handle_resource(self, exchange: Exchange, app_id: bytes, now: float) -> bool:
        """Serve `/apps/<app_id>/mcp` to an access token for that resource; False leaves the request to OAuth.

        Only what would be served goes on here; a preflight, a refused Origin and every refused
        token are answered by net/oauth.py, with the challenge RFC 6750 §3 asks of a resource.
        """
        request = exchange.request
        authorization = request.header(AUTHORIZATION)
        if authorization is None or request.method == b"OPTIONS":
            return False
        origin = request.header(ORIGIN)
        cors: Headers = ()
        if origin is not None:
            if not origin_allowed(self.allowed_origins, origin):
                return False
            cors = cors_headers(origin)
        token = bearer_token(self._bearer_cache, authorization)
        if token is None:
            return False
        try:
            grant = self.verifier.grant(token, ROLE_AGENT, now)
        except TokenError:
            return False
        if grant.resource != app_id:  # the token's app (sub) and resource (aud) are both this path's
            return False
        self._serve(exchange, request, grant, cors, now)
        return True

    def _serve(self, exchange: Exchange, request: Request, grant: Grant, cors: Headers, now: float) -> None:
        """Answer a request whose token verified: its rate, method, Accept, body and era."""
        method = request.method
        rate = self.agent_rate
        if rate > 0.0:
            wait = over_rate(grant, rate, now)
            if wait:
                self._over_rate(exchange, grant, cors, wait, now)
                return
        if method != b"POST" and method != b"GET":
            exchange.respond(
                405,
                (*JSON_HEADERS, *cors, ALLOW),
                jsonrpc.error(NULL_ID, INVALID_REQUEST, "Method not allowed"),
            )
            return
        json_ok, sse_ok, sse_named = media_accepted(self._accept_cache, request.header(ACCEPT))
        context = Context.__new__(Context)
        context.init_context(exchange, grant, cors, json_ok, sse_named)
        if method == b"GET":
            self._get(context, sse_named, now)
            return
        if not json_ok and not sse_ok:
            context.fail(
                406, NULL_ID, INVALID_REQUEST, "Not Acceptable: accept application/json or text/event-stream"
            )
            return
        body = request.body
        if body is None:
            context.fail(413, NULL_ID, INVALID_REQUEST, "Request body larger than 4 MiB")
            return
        # JSON text is UTF-8 (RFC 8259 §8.1). msgspec checks the strings it decodes, not the
        # values it keeps as Raw: arguments would reach the app in a text frame, and its
        # WebSocket would close on them (1007), dropping every call it holds.
        if not body.isascii() and not valid_utf8(body):
            context.fail(400, NULL_ID, PARSE_ERROR, "Parse error: the body is not UTF-8")
            return
        try:
            message = decode_body(body)
        except msgspec.ValidationError:
            # Valid JSON, wrong shape: a scalar body, or params that is not an object.
            context.fail(
                400, jsonrpc.salvage_id(body), INVALID_REQUEST, "Invalid Request: params must be an object"
            )
            return
        except msgspec.DecodeError:
            context.fail(400, NULL_ID, PARSE_ERROR, "Parse error: the body is not JSON")
            return
        except RecursionError:
            context.fail(400, NULL_ID, PARSE_ERROR, "Parse error: the body nests too deeply")
            return
        except TooManyElements:
            serve_batch(self.bridge, context, None, now)
            return
        if isinstance(message, list):
            serve_batch(self.bridge, context, message, now)
        else:
            self._route(context, message, now)

    def _over_rate(self, exchange: Exchange, grant: Grant, cors: Headers, wait: int, now: float) -> None:
        """429 to a token over --agent-rate; the error carries the request's id where the body names one."""
        body = exchange.request.body
        id_json = jsonrpc.salvage_id(body) if body else NULL_ID
        self.bridge.refused_agent(REFUSED_RATE, grant.client_id, now)
        context = Context.__new__(Context)
        context.init_context(exchange, grant, cors, True, False)
        context.too_many(
            id_json,
            wait,
            f"Too many requests: this agent token may make {self.agent_rate:g} requests a second; retry after {wait} s",
        )

    # -- GET: the legacy notification stream ------------------------------------------------

    def _get(self, context: Context, sse_named: bool, now: float) -> None:
        version = (context.exchange.request.header(MCP_PROTOCOL_VERSION) or b"").strip()
        if version == MODERN.encode():
            context.exchange.respond(
                405,
                (*JSON_HEADERS, *context.cors, (b"allow", b"POST")),
                jsonrpc.error(NULL_ID, INVALID_REQUEST, "Method not allowed: 2026-07-28 has no GET stream"),
            )
            return
        if not sse_named:
            context.fail(
                406, NULL_ID, INVALID_REQUEST, "Not Acceptable: the GET stream needs text/event-stream"
            )
            return
        context.open_stream(self.bridge, LegacyStream(context.exchange), NULL_ID, now)

    # -- era routing (docs/protocol.md, Which era serves a request) -------------------------

    def _route(self, context: Context, message: Message, now: float) -> None:
        request = context.exchange.request
        repeated = request.repeated
        if repeated and b"mcp-protocol-version" in repeated:
            context.fail(
                400, valid_id(message.id) or NULL_ID, HEADER_MISMATCH, "MCP-Protocol-Version appears twice"
            )
            return
        header = request.header(MCP_PROTOCOL_VERSION)
        header_version = None
        if header is not None:
            header_version = header_text(header, _HEADER_VERSIONS)
        # Read once here for the era's method too: a struct member read is a generic attribute lookup.
        params = message.params
        meta = params.meta
        body_version = meta.protocolVersion if type(meta) is Meta else None
        if not isinstance(body_version, str):
            body_version = None
        if body_version is not None and header_version is not None and body_version != header_version:
            context.fail(
                400,
                valid_id(message.id) or NULL_ID,
                HEADER_MISMATCH,
                "MCP-Protocol-Version header does not match params._meta protocolVersion",
            )
            return
        named = body_version if body_version is not None else header_version
        if named is None or named in LEGACY:
            serve_legacy(self.bridge, context, message, params, meta, now)
        elif named == MODERN:
            serve_modern(
                self.bridge,
                self._name_cache,
                context,
                message,
                params,
                meta,
                header_version,
                body_version,
                now,
            )
        else:
            context.fail(
                400,
                valid_id(message.id) or NULL_ID,
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(SUPPORTED), "requested": named},
            )
