"""The agent endpoint: MCP Streamable HTTP in both eras, answered from the bridge (ClientMCP v1 §4, docs/protocol.md).

`AgentEndpoint.handle()` runs the checks of docs/protocol.md in their order (Origin, preflight,
token, method, Accept, body size, JSON, era, then the modern ladder),
then maps the request onto the bridge. Every request stands alone: the only state kept
is the map of legacy calls that a `notifications/cancelled` may name.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import msgspec
import orjson
from msgspec import UNSET

from clientmcp_fast import __version__
from clientmcp_fast.core import jsonrpc, outcomes
from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.http import (
    ACCEPT,
    AUTHORIZATION,
    JSON_ONLY,
    MCP_METHOD,
    MCP_NAME,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    ORIGIN,
    Exchange,
    Headers,
)
from clientmcp_fast.core.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CAPABILITIES,
    META_VERSION,
    METHOD_NOT_FOUND,
    NULL_ID,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    UNSUPPORTED_PROTOCOL_VERSION,
    Message,
    Meta,
    Params,
    TooManyElements,
    decode_body,
    valid_id,
    wants_tool_changes,
)
from clientmcp_fast.core.limits import MAX_BATCH_ELEMENTS
from clientmcp_fast.core.param_headers import decode_header_value, param_header_problem
from clientmcp_fast.core.tokens import ROLE_AGENT, TokenError, TokenVerifier
from clientmcp_fast.core.websocket import valid_utf8
from clientmcp_fast.log import logger
from clientmcp_fast.speedups import complete_result, first_byte, json_member, jsonrpc_result

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge
    from clientmcp_fast.core.channel import AppChannel
    from clientmcp_fast.core.register import Tool

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_LEGACY = "2025-11-25"
UNNAMED_LEGACY = "2025-03-26"  # a request that names no revision (MCP 2025-06-18, basic/transports)
# server/discover's supportedVersions and -32022's `supported` are this one list (docs/protocol.md).
SUPPORTED = (MODERN, *LEGACY)

META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"

SERVER_INFO = {"name": "clientmcp", "version": __version__}
_SERVER_INFO_META = b'"_meta":{"io.modelcontextprotocol/serverInfo":' + orjson.dumps(SERVER_INFO) + b"}"
_CAPABILITIES = b'{"tools":{"listChanged":true}}'
_MODERN_LIST_TAIL = b',"ttlMs":0,"cacheScope":"private",' + _SERVER_INFO_META + b"}"

SSE_HEADERS = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)
JSON_HEADERS = JSON_ONLY
KEEPALIVE = b": keep-alive\n\n"
_ALLOW = (b"allow", b"GET, POST, OPTIONS")
_LIST_CHANGED = jsonrpc.notification("notifications/tools/list_changed")

_HTTP_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_LOOPBACK_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?")
_ROUTING_HEADERS = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
# The usual values of MCP-Protocol-Version and Mcp-Method, as sent and as text (see _header_text).
_HEADER_VERSIONS = {version.encode(): version for version in SUPPORTED}
_HEADER_METHODS = {
    method.encode(): method
    for method in ("tools/call", "tools/list", "server/discover", "subscriptions/listen")
}


def sse_event(payload: bytes) -> bytes:
    """One SSE `message` event; JSON's own line breaks are whitespace, so they become spaces."""
    if b"\n" in payload or b"\r" in payload:
        # Raw line breaks can only sit between JSON tokens (strings escape theirs), so
        # replacing them keeps the JSON intact and the event one line of data.
        payload = payload.replace(b"\r", b" ").replace(b"\n", b" ")
    return b"event: message\ndata: " + payload + b"\n\n"


def tool_error(text: str, modern: bool) -> bytes:
    """A CallToolResult with `isError: true`: how availability problems reach the model (ClientMCP v1 §4.3)."""
    body = b'{"content":[{"type":"text","text":' + orjson.dumps(text) + b'}],"isError":true}'
    return b'{"resultType":"complete",' + body[1:] if modern else body


def _header_text(value: bytes, known: dict[bytes, str]) -> str:
    """A header's value as text, trimmed; the usual values are looked up rather than decoded."""
    return known.get(value) or value.strip().decode("latin-1")


# The memos of header values that agents choose (their Authorization, their Mcp-Name) are
# bounded in entries and in the length of a value kept: distinct or huge values, sent
# without end, cost at most about 2 x 1,024 x 2 KiB per memo.
_MEMO_ENTRIES = 1_024
_MEMO_VALUE_BYTES = 2_048
_UNSEEN = object()


def _remember(memo: dict, value: bytes, meaning: object) -> None:
    """Keep what a header value means, unless the value is too long; the oldest entry goes first."""
    if len(value) <= _MEMO_VALUE_BYTES:
        if len(memo) >= _MEMO_ENTRIES:
            del memo[next(iter(memo))]  # dicts keep insertion order: the oldest goes
        memo[value] = meaning


def _session_key(header: bytes | None) -> bytes | None:
    """What a legacy call's Mcp-Session-Id header is matched by: trimmed, None when absent or empty."""
    return header.strip() if header else None


def _bearer_token(authorization: bytes) -> bytes:
    """The token of an `Authorization: Bearer <token>` header; b"" for any other scheme."""
    scheme, _, value = authorization.strip().partition(b" ")
    value = value.strip()
    return value if scheme.lower() == b"bearer" else b""


def _parse_accept(value: bytes | None) -> tuple[bool, bool, bool]:
    """From an Accept header: (JSON acceptable, SSE acceptable, SSE named explicitly)."""
    if value is None:
        return True, True, False  # no Accept header means */* (docs/protocol.md, Which era serves a request)
    json_ok = sse_ok = sse_named = False
    for item in value.split(b","):
        media, *parameters = item.split(b";")
        media = media.strip().lower()
        refused = False
        for parameter in parameters:
            key, _, weight = parameter.partition(b"=")
            if key.strip().lower() == b"q":
                try:
                    refused = float(weight.strip()) <= 0
                except ValueError:
                    refused = True
        if refused:
            continue
        if media in (b"application/json", b"application/*", b"*/*"):
            json_ok = True
        if media in (b"text/event-stream", b"text/*", b"*/*"):
            sse_ok = True
        if media == b"text/event-stream":
            sse_named = True
    return json_ok, sse_ok, sse_named


class _Context(Call):
    """One request being answered: where the answer goes and in which shape.

    For a tools/call it is also the call in flight (the bridge's `Call`), so that a call
    costs one object rather than two.
    """

    __slots__ = (
        "exchange",
        "client_id",
        "cors",
        "json_ok",
        "bridge",
        "id_json",
        "modern",
        "session",
    )

    def init_context(
        self,
        exchange: Exchange,
        client_id: str,
        cors: Headers,
        json_ok: bool,
        sse_named: bool,
    ) -> None:
        """Set the fields of a context made with `_Context.__new__(_Context)`.

        Compiled, `__new__` and this are C calls, where calling the class would parse its
        arguments: a context is made this way, never by calling the class.
        """
        self.init_call(sse_named)  # `wants_stream`: the Accept header named text/event-stream
        self.exchange = exchange
        self.client_id = client_id
        self.cors = cors
        self.json_ok = json_ok
        # Set by `start_call` for a tools/call.
        self.bridge: Bridge | None = None
        self.id_json = NULL_ID
        self.modern = False
        self.session: bytes | None = None  # legacy: Mcp-Session-Id as sent (see _session_key)

    def reply(self, body: bytes, extra: Headers = ()) -> None:
        """A 200 answer carrying one JSON-RPC message, as JSON, or as one SSE event if JSON is not accepted."""
        if self.json_ok:
            headers = JSON_HEADERS if not self.cors and not extra else (*JSON_HEADERS, *self.cors, *extra)
            self.exchange.respond(200, headers, body)
        else:
            self.exchange.respond(200, (*SSE_HEADERS, *self.cors, *extra), sse_event(body))

    def fail(self, status: int, id_json: bytes, code: int, message: str, data: Any = None) -> None:
        """A JSON-RPC error with an HTTP status; always JSON (it is decided before any stream starts)."""
        headers = (*JSON_HEADERS, *self.cors) if self.cors else JSON_HEADERS
        self.exchange.respond(status, headers, jsonrpc.error(id_json, code, message, data))

    def accepted(self) -> None:
        """202 with no body: a notification or a response the agent posted."""
        self.exchange.respond(202, self.cors, b"")

    # -- the bridge's Call: a tools/call waiting on the app -----------------------------------

    def start_call(
        self, bridge: Bridge, app: AppChannel, tool: Tool, arguments: bytes, modern: bool,
        id_json: bytes, session: bytes | None, now: float,
    ) -> None:  # fmt: skip
        """Send this tools/call to the app; its answer comes back through the `call_*` methods."""
        self.bridge = bridge
        self.id_json = id_json
        self.modern = modern
        self.session = session
        self.exchange.on_abandon = self.abandoned
        bridge.start_call(app, tool, arguments, self, now)

    def call_result(self, result: bytes, has_result_type: bool) -> None:
        if not self.modern:
            self._finish(jsonrpc_result(self.id_json, result))
        elif not has_result_type:
            # Spliced, not re-encoded: the app's bytes pass through, resultType goes in front.
            self._finish(complete_result(self.id_json, result))
        else:
            members = jsonrpc.decode_json(result)
            members["resultType"] = "complete"
            self._finish(jsonrpc_result(self.id_json, orjson.dumps(members)))

    def call_error(self, text: str) -> None:
        self._finish(jsonrpc_result(self.id_json, tool_error(text, self.modern)))

    def call_slow(self) -> None:
        self.exchange.start_stream((*SSE_HEADERS, *self.cors))
        self.exchange.stream(KEEPALIVE)

    def call_tick(self) -> None:
        self.exchange.stream(KEEPALIVE)

    def _finish(self, body: bytes) -> None:
        if self.streaming:
            exchange = self.exchange
            exchange.stream(sse_event(body))
            exchange.end_stream()
        else:
            self.reply(body)

    def abandoned(self) -> None:
        """The agent hung up before the answer: the app gets `cancel` (docs/protocol.md, Mapping)."""
        self.bridge.abandon(self)  # type: ignore[union-attr]

    def cancelled(self) -> None:
        """A legacy `notifications/cancelled` named this call: `cancel` to the app, and end the answer."""
        self.bridge.abandon(self)  # type: ignore[union-attr]
        exchange = self.exchange
        exchange.on_abandon = None
        if self.streaming:
            exchange.end_stream()
        else:
            self.fail(200, self.id_json, REQUEST_CANCELLED, "Request cancelled")


class _CoalescingStream:
    """What both eras' notification streams share: nothing piles up for an agent that does not read.

    A list_changed says only "read the tools again", so one still unsent covers every change
    after it; a keep-alive is for a stream that sends nothing else. So while the agent has
    not taken what was written, a further list_changed or keep-alive is not written: an
    unread stream holds at most a keep-alive and one list_changed, however many changes come.
    """

    __slots__ = ("exchange", "_last_was_change")

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self._last_was_change = False

    def _change(self, event: bytes) -> None:
        if self._last_was_change and self.exchange.backlog():
            return
        self._last_was_change = True
        self.exchange.stream(event)

    def keep_alive(self) -> None:
        if self.exchange.backlog():
            return
        self._last_was_change = False
        self.exchange.stream(KEEPALIVE)


class ListenStream(_CoalescingStream):
    """A modern `subscriptions/listen` stream (MCP 2026-07-28, subscriptions): the bridge's `NotificationStream`."""

    __slots__ = ("id_json", "tools")

    def __init__(self, exchange: Exchange, id_json: bytes, tools: bool) -> None:
        super().__init__(exchange)
        self.id_json = id_json
        self.tools = tools

    def _tag(self) -> bytes:
        return b'{"' + META_SUBSCRIPTION.encode() + b'":' + self.id_json + b"}"

    def acknowledge(self) -> None:
        honored = b'{"toolsListChanged":true}' if self.tools else b"{}"
        params = b'{"_meta":' + self._tag() + b',"notifications":' + honored + b"}"
        self.exchange.stream(
            sse_event(jsonrpc.notification("notifications/subscriptions/acknowledged", params))
        )

    def tools_changed(self) -> None:
        if self.tools:
            params = b'{"_meta":' + self._tag() + b"}"
            self._change(sse_event(jsonrpc.notification("notifications/tools/list_changed", params)))

    def end(self) -> None:
        final = b'{"resultType":"complete","_meta":' + self._tag() + b"}"
        self.exchange.on_abandon = None
        self.exchange.stream(sse_event(jsonrpc_result(self.id_json, final)))
        self.exchange.end_stream()


class LegacyStream(_CoalescingStream):
    """A legacy GET notification stream (MCP 2025-11-25, basic/transports): the bridge's `NotificationStream`."""

    __slots__ = ()

    def tools_changed(self) -> None:
        self._change(sse_event(_LIST_CHANGED))

    def end(self) -> None:
        self.exchange.on_abandon = None
        self.exchange.end_stream()


class AgentEndpoint:
    """Serves `/mcp` and `/mcp/<token>`: each request checked, routed to its era, and answered."""

    __slots__ = ("bridge", "verifier", "allowed_origins", "_accept_cache", "_bearer_cache", "_name_cache")

    def __init__(
        self, bridge: Bridge, verifier: TokenVerifier, allowed_origins: tuple[str, ...] | None
    ) -> None:
        self.bridge = bridge
        self.verifier = verifier
        self.allowed_origins = None if allowed_origins is None else {o.lower() for o in allowed_origins}
        self._accept_cache: dict[bytes | None, tuple[bool, bool, bool]] = {}
        # An agent sends the same Authorization header with every request, and names the same
        # tools in Mcp-Name again and again: each value is read once (see _remember).
        self._bearer_cache: dict[bytes, bytes] = {}
        self._name_cache: dict[bytes, str | None] = {}

    # -- the order of checks (docs/protocol.md, Which era serves a request) -----------------

    def handle(self, exchange: Exchange, path_token: bytes, now: float) -> None:
        """Answer one HTTP request to the agent endpoint."""
        request = exchange.request
        origin = request.header(ORIGIN)
        cors: Headers = ()
        if origin is not None:
            if not self._origin_allowed(origin):
                exchange.respond(
                    403,
                    JSON_HEADERS,
                    jsonrpc.error(NULL_ID, INVALID_REQUEST, "Forbidden: Origin not allowed"),
                )
                return
            cors = (
                (b"access-control-allow-origin", origin),
                (b"vary", b"Origin"),
                (b"access-control-expose-headers", b"Mcp-Session-Id, WWW-Authenticate"),
            )
        method = request.method
        if method == b"OPTIONS":
            self._preflight(exchange, origin, cors)
            return
        client_id = self._authenticate(exchange, request.header(AUTHORIZATION), path_token, cors, now)
        if client_id is None:
            return
        if method != b"POST" and method != b"GET":
            exchange.respond(
                405,
                (*JSON_HEADERS, *cors, _ALLOW),
                jsonrpc.error(NULL_ID, INVALID_REQUEST, "Method not allowed"),
            )
            return
        accept = request.header(ACCEPT)
        parsed = self._accept_cache.get(accept)
        if parsed is None:
            parsed = _parse_accept(accept)
            if len(self._accept_cache) < 256:
                self._accept_cache[accept] = parsed
        json_ok, sse_ok, sse_named = parsed
        context = _Context.__new__(_Context)
        context.init_context(exchange, client_id, cors, json_ok, sse_named)
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
            self._batch(context, None, now)
            return
        if isinstance(message, list):
            self._batch(context, message, now)
        else:
            self._route(context, message, now)

    def _origin_allowed(self, origin: bytes) -> bool:
        text = origin.decode("latin-1").strip().lower()
        allowed = self.allowed_origins
        if allowed is None:
            return _LOOPBACK_ORIGIN.fullmatch(text) is not None
        return "*" in allowed or text in allowed

    def _preflight(self, exchange: Exchange, origin: bytes | None, cors: Headers) -> None:
        if origin is None:
            exchange.respond(204, (_ALLOW,), b"")
            return
        requested = exchange.request.headers.get(b"access-control-request-headers", b"")
        names = [name.strip() for name in requested.split(b",") if name.strip()]
        if not all(_HTTP_TOKEN.fullmatch(name) for name in names):
            exchange.respond(400, cors, b"")
            return
        headers = [
            *cors,
            (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
            (b"access-control-max-age", b"86400"),
        ]
        if names:
            headers.append((b"access-control-allow-headers", b", ".join(names)))
        exchange.respond(204, headers, b"")

    def _authenticate(
        self, exchange: Exchange, authorization: bytes | None, path_token: bytes, cors: Headers, now: float
    ) -> str | None:
        """The client ID the agent token selects; None after answering 401 (ClientMCP v1 §4)."""
        token = None
        if authorization is not None:
            cache = self._bearer_cache
            token = cache.get(authorization)
            if token is None:
                token = _bearer_token(authorization)
                _remember(cache, authorization, token)
            token = token or None
        if token is None and path_token:
            token = path_token
        if token is None:
            problem = "no agent token: send Authorization: Bearer <token>"
            challenge = b"Bearer"
        else:
            try:
                return self.verifier.verify(token, ROLE_AGENT, now)
            except TokenError as error:
                problem = str(error)
                challenge = b'Bearer error="invalid_token"'
        logger.debug("agent refused: %s", problem)
        exchange.respond(
            401,
            (*JSON_HEADERS, *cors, (b"www-authenticate", challenge)),
            jsonrpc.error(NULL_ID, INVALID_REQUEST, f"Unauthorized: {problem}"),
        )
        return None

    # -- GET: the legacy notification stream ------------------------------------------------

    def _get(self, context: _Context, sse_named: bool, now: float) -> None:
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
        self._open_stream(context, LegacyStream(context.exchange), NULL_ID, now)

    def _open_stream(
        self, context: _Context, stream: LegacyStream | ListenStream, id_json: bytes, now: float
    ) -> bool:
        bridge = self.bridge
        client_id = context.client_id
        if not bridge.add_stream(client_id, stream, now):
            context.fail(429, id_json, INVALID_REQUEST, "Too many notification streams")
            return False
        exchange = context.exchange
        exchange.on_abandon = lambda: bridge.remove_stream(client_id, stream)
        exchange.start_stream((*SSE_HEADERS, *context.cors))
        return True

    # -- era routing (docs/protocol.md, Which era serves a request) -------------------------

    def _route(self, context: _Context, message: Message, now: float) -> None:
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
            header_version = _header_text(header, _HEADER_VERSIONS)
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
            self._legacy(context, message, params, named or UNNAMED_LEGACY, now)
        elif named == MODERN:
            self._modern(context, message, params, meta, header_version, body_version, now)
        else:
            context.fail(
                400,
                valid_id(message.id) or NULL_ID,
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(SUPPORTED), "requested": named},
            )

    # -- 2026-07-28 -------------------------------------------------------------------------

    def _modern(
        self, context: _Context, message: Message, params: Params, meta: object,
        header_version: str | None, body_version: str | None, now: float,
    ) -> None:  # fmt: skip
        """A 2026-07-28 request; the versions are those `_route` read (the header's trimmed, the body's if a string)."""
        raw_id = message.id
        id_json = valid_id(raw_id)
        method = message.method
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
                    context.fail(
                        400, id_json, HEADER_MISMATCH, f"{name.decode()} header appears more than once"
                    )
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
        if mcp_method is None or _header_text(mcp_method, _HEADER_METHODS) != method:
            context.fail(400, id_json, HEADER_MISMATCH, "Mcp-Method header does not match the method")
            return
        if method == "tools/call":
            name = params.name
            mcp_name = request.header(MCP_NAME)
            decoded = None
            if mcp_name is not None:
                cache = self._name_cache
                decoded = cache.get(mcp_name, _UNSEEN)
                if decoded is _UNSEEN:
                    decoded = decode_header_value(mcp_name.strip(b" \t").decode("latin-1"))
                    _remember(cache, mcp_name, decoded)
            if decoded != name:
                context.fail(400, id_json, HEADER_MISMATCH, "Mcp-Name header does not match params.name")
                return
            self._call(context, id_json, name, params, True, None, now)
        elif method == "tools/list":
            self._list(context, id_json, params, True)
        elif method == "server/discover":
            self._discover(context, id_json)
        elif method == "subscriptions/listen":
            self._listen(context, id_json, params, now)
        else:
            context.fail(404, id_json, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _discover(self, context: _Context, id_json: bytes) -> None:
        body = b'{"resultType":"complete","supportedVersions":' + orjson.dumps(SUPPORTED)
        body += b',"capabilities":' + _CAPABILITIES
        instructions = self._instructions(context.client_id)
        if instructions is not None:
            body += b',"instructions":' + orjson.dumps(instructions)
        context.reply(jsonrpc_result(id_json, body + _MODERN_LIST_TAIL))

    def _listen(self, context: _Context, id_json: bytes, params: Params, now: float) -> None:
        if not context.wants_stream:
            context.fail(
                406, id_json, INVALID_REQUEST, "Not Acceptable: subscriptions/listen needs text/event-stream"
            )
            return
        stream = ListenStream(context.exchange, id_json, wants_tool_changes(params.notifications))
        if self._open_stream(context, stream, id_json, now):
            stream.acknowledge()

    # -- 2025-03-26, 2025-06-18, 2025-11-25 -------------------------------------------------

    def _legacy(self, context: _Context, message: Message, params: Params, version: str, now: float) -> None:
        method = message.method
        raw_id = message.id
        if raw_id is UNSET:
            if isinstance(method, str):
                if method == "notifications/cancelled":
                    self._cancel(context, params)
                context.accepted()
            elif message.result is not UNSET or message.error is not UNSET:
                context.accepted()  # a response to a request we never send: nothing to do
            else:
                context.fail(400, NULL_ID, INVALID_REQUEST, "Invalid Request")
            return
        id_json = valid_id(raw_id)
        if id_json is None or message.jsonrpc != "2.0" or not isinstance(method, str):
            context.fail(400, id_json or NULL_ID, INVALID_REQUEST, "Invalid Request: a string or number id")
            return
        if method == "tools/call":
            # The session as sent: only a cancellation compares it (see _session_key), not every call.
            self._call(
                context,
                id_json,
                params.name,
                params,
                False,
                context.exchange.request.header(MCP_SESSION_ID),
                now,
            )
        elif method == "tools/list":
            self._list(context, id_json, params, False)
        elif method == "initialize":
            self._initialize(context, id_json, params)
        elif method == "ping":
            context.reply(jsonrpc_result(id_json, b"{}"))
        else:
            context.fail(200, id_json, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, context: _Context, id_json: bytes, params: Params) -> None:
        asked = json_member(params.protocolVersion)
        version = asked if asked in LEGACY else LATEST_LEGACY
        body = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": SERVER_INFO,
        }
        instructions = self._instructions(context.client_id)
        if instructions is not None:
            body["instructions"] = instructions
        # The session id only namespaces the ids a notifications/cancelled names (ClientMCP v1 §4.1).
        session = os.urandom(16).hex().encode()  # secrets.token_hex, without importing `secrets`
        context.reply(jsonrpc_result(id_json, orjson.dumps(body)), ((b"mcp-session-id", session),))

    def _batch(self, context: _Context, elements: list[msgspec.Raw] | None, now: float) -> None:
        """A 2025-03-26 batch; `elements` is None for one of over MAX_BATCH_ELEMENTS (not decoded)."""
        header = context.exchange.request.header(MCP_PROTOCOL_VERSION)
        if header is not None and header.strip() != UNNAMED_LEGACY.encode():
            context.fail(400, NULL_ID, INVALID_REQUEST, "Invalid Request: batches exist only in 2025-03-26")
            return
        if elements is None:  # counted, not decoded (see jsonrpc.decode_body)
            context.fail(
                400,
                NULL_ID,
                INVALID_REQUEST,
                f"Invalid Request: a batch of over {MAX_BATCH_ELEMENTS} elements",
            )
            return
        if not elements:
            context.fail(400, NULL_ID, INVALID_REQUEST, "Invalid Request: an empty batch")
            return
        _Batch(self, context, elements, now)

    def _cancel(self, context: _Context, params: Params) -> None:
        """Cancel the legacy call of this client ID and session that the id names (docs/protocol.md, Mapping)."""
        request_id = valid_id(params.requestId)
        app = self.bridge.apps.get(context.client_id)
        if request_id is None or app is None:
            return
        session = _session_key(context.exchange.request.header(MCP_SESSION_ID))
        # A scan of the app's calls, not an index: cancellations are rare, calls are not.
        for call in app.calls.values():
            if (
                isinstance(call, _Context)
                and not call.modern
                and call.id_json == request_id
                and _session_key(call.session) == session
            ):
                call.cancelled()
                return

    # -- both eras --------------------------------------------------------------------------

    def _instructions(self, client_id: str) -> str | None:
        app = self.bridge.apps.get(client_id)
        return app.toolset.instructions if app is not None and app.toolset is not None else None

    def _list(self, context: _Context, id_json: bytes, params: Params, modern: bool) -> None:
        cursor = json_member(params.cursor)
        if cursor is not UNSET and cursor is not None:
            context.fail(400 if modern else 200, id_json, INVALID_PARAMS, "Invalid params: unknown cursor")
            return
        app = self.bridge.apps.get(context.client_id)
        tools = app.toolset.tools_json if app is not None and app.toolset is not None else b"[]"
        if modern:
            context.reply(
                jsonrpc_result(id_json, b'{"resultType":"complete","tools":' + tools + _MODERN_LIST_TAIL)
            )
        else:
            context.reply(jsonrpc_result(id_json, b'{"tools":' + tools + b"}"))

    def _call(
        self,
        context: _Context,
        id_json: bytes,
        name: object,
        params: Params,
        modern: bool,
        session: bytes | None,
        now: float,
    ) -> None:
        """A tools/call; `name` is `params.name` (see `decode_body`)."""
        error_status = 400 if modern else 200
        if not isinstance(name, str):
            context.fail(error_status, id_json, INVALID_PARAMS, "Invalid params: name must be a string")
            return
        arguments = params.arguments
        if arguments is UNSET or (len(arguments) == 4 and bytes(arguments) == b"null"):
            arguments = b"{}"  # absent arguments reach the app as {} (docs/protocol.md, Mapping)
        elif first_byte(arguments) != 0x7B:  # "{"
            context.fail(error_status, id_json, INVALID_PARAMS, "Invalid params: arguments must be an object")
            return
        app = self.bridge.apps.get(context.client_id)
        if app is None:
            context.reply(jsonrpc_result(id_json, tool_error(outcomes.OFFLINE, modern)))
            return
        toolset = app.toolset
        if toolset is None:
            context.reply(jsonrpc_result(id_json, tool_error(outcomes.NOT_REGISTERED, modern)))
            return
        tools = toolset.tools
        tool = tools.get(name)
        if tool is None:
            context.fail(error_status, id_json, INVALID_PARAMS, f"Unknown tool: {name}")
            return
        if modern and tool.header_params:
            request = context.exchange.request
            problem = param_header_problem(tool.header_params, arguments, request.headers, request.repeated)
            if problem is not None:
                context.fail(400, id_json, HEADER_MISMATCH, problem)
                return
        context.start_call(self.bridge, app, tool, arguments, modern, id_json, session, now)


class _BatchExchange(Exchange):
    """Stands in for the exchange of one element of a 2025-03-26 batch: collects its answer."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: _Batch, index: int) -> None:
        self.request = batch.context.exchange.request
        self.on_abandon = None
        self._batch = batch
        self._index = index

    def respond(self, status: int, headers: Headers, body: bytes) -> None:
        self._batch.answered(self._index, body)

    # A batch element is answered as JSON inside the batch's array, so it never streams.
    def start_stream(self, headers: Headers) -> None:
        raise AssertionError("a batch element never streams")

    def stream(self, data: bytes) -> None:
        raise AssertionError("a batch element never streams")

    def end_stream(self) -> None:
        raise AssertionError("a batch element never streams")


class _Batch:
    """A 2025-03-26 batch: every element served as its own legacy request, answered as one array."""

    __slots__ = ("context", "answers", "waiting", "exchanges")

    def __init__(
        self, endpoint: AgentEndpoint, context: _Context, elements: list[msgspec.Raw], now: float
    ) -> None:
        self.context = context
        self.answers: list[bytes | None] = [None] * len(elements)
        self.waiting = len(elements)
        self.exchanges = [_BatchExchange(self, index) for index in range(len(elements))]
        context.exchange.on_abandon = self._abandoned
        for index, raw in enumerate(elements):
            # JSON in each element, never SSE: the batch answer is one JSON array.
            element = _Context.__new__(_Context)
            element.init_context(self.exchanges[index], context.client_id, (), True, False)
            try:
                message = jsonrpc.decode_message(raw)
            except msgspec.ValidationError:
                element.fail(200, jsonrpc.salvage_id(raw), INVALID_REQUEST, "Invalid Request")
                continue
            if message.method == "initialize":
                element.fail(
                    200, valid_id(message.id) or NULL_ID, INVALID_REQUEST, "initialize cannot be batched"
                )
                continue
            endpoint._legacy(element, message, message.params, UNNAMED_LEGACY, now)

    def answered(self, index: int, body: bytes) -> None:
        self.answers[index] = body
        self.waiting -= 1
        if self.waiting == 0:
            self.context.exchange.on_abandon = None
            parts = [answer for answer in self.answers if answer]
            if parts:
                self.context.exchange.respond(
                    200, (*JSON_HEADERS, *self.context.cors), b"[" + b",".join(parts) + b"]"
                )
            else:
                self.context.accepted()

    def _abandoned(self) -> None:
        for exchange in self.exchanges:
            if exchange.on_abandon is not None:
                exchange.on_abandon()
