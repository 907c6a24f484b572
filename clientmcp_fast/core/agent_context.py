"""One request to the agent endpoint being answered: JSON or SSE, and for a tools/call the call in flight."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.agent_streams import KEEPALIVE, SSE_HEADERS, sse_event
from clientmcp_fast.core.calls import Call
from clientmcp_fast.core.http import JSON_ONLY, Exchange, Headers
from clientmcp_fast.core.jsonrpc import INVALID_REQUEST, NULL_ID, REQUEST_CANCELLED, encode_json
from clientmcp_fast.core.progress import progress_notification
from clientmcp_fast.speedups import complete_result, jsonrpc_result

if TYPE_CHECKING:
    from clientmcp_fast.core.apps import App
    from clientmcp_fast.core.bridge import Bridge, NotificationStream
    from clientmcp_fast.core.progress import Report
    from clientmcp_fast.core.register import Tool
    from clientmcp_fast.core.tokens import Grant

JSON_HEADERS = JSON_ONLY


def tool_error(text: str, modern: bool) -> bytes:
    """A CallToolResult with `isError: true`: how availability problems reach the model (ClientMCP v1 §4.3)."""
    body = b'{"content":[{"type":"text","text":' + encode_json(text) + b'}],"isError":true}'
    return b'{"resultType":"complete",' + body[1:] if modern else body


def session_key(header: bytes | None) -> bytes | None:
    """What a legacy call's Mcp-Session-Id header is matched by: trimmed, None when absent or empty."""
    return header.strip() if header else None


class Context(Call):
    """One request being answered: where the answer goes and in which shape.

    For a tools/call it is also the call in flight (the bridge's `Call`), so that a call
    costs one object rather than two.
    """

    __slots__ = (
        "exchange",
        "cors",
        "json_ok",
        "bridge",
        "id_json",
        "session",
    )

    def init_context(
        self,
        exchange: Exchange,
        grant: Grant,
        cors: Headers,
        json_ok: bool,
        sse_named: bool,
    ) -> None:
        """Set the fields of a context made with `Context.__new__(Context)`.

        Compiled, `__new__` and this are C calls, where calling the class would parse its
        arguments: a context is made this way, never by calling the class.
        """
        self.init_call(sse_named)  # `wants_stream`: the Accept header named text/event-stream
        self.exchange = exchange
        self.grant = grant  # the agent token's: its scope, and its calls in flight (core/bridge.py)
        self.client_id = grant.client_id
        self.cors = cors
        self.json_ok = json_ok
        # Set by `start_call` for a tools/call.
        self.bridge: Bridge | None = None
        self.id_json = NULL_ID
        self.session: bytes | None = None  # legacy: Mcp-Session-Id as sent (see agent_legacy)

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

    def too_many(self, id_json: bytes, retry_after: int, message: str) -> None:
        """429 with Retry-After (whole seconds) and a JSON-RPC error: a per-token limit was reached."""
        headers = (*JSON_HEADERS, *self.cors, (b"retry-after", str(retry_after).encode()))
        self.exchange.respond(429, headers, jsonrpc.error(id_json, INVALID_REQUEST, message))

    def accepted(self) -> None:
        """202 with no body: a notification or a response the agent posted."""
        self.exchange.respond(202, self.cors, b"")

    def open_stream(self, bridge: Bridge, stream: NotificationStream, id_json: bytes, now: float) -> bool:
        """Answer with a notification stream of this client ID; False after answering 429."""
        client_id = self.client_id
        if not bridge.add_stream(client_id, stream, now):
            self.fail(429, id_json, INVALID_REQUEST, "Too many notification streams")
            return False
        exchange = self.exchange
        exchange.on_abandon = lambda now: bridge.remove_stream(client_id, stream)
        exchange.start_stream((*SSE_HEADERS, *self.cors))
        return True

    # -- the bridge's Call: a tools/call waiting on the app -----------------------------------

    def start_call(
        self, bridge: Bridge, app: App, tool: Tool, arguments: bytes, modern: bool,
        id_json: bytes, session: bytes | None, now: float,
    ) -> None:  # fmt: skip
        """Send this tools/call to the app; its answer comes back through the `call_*` methods."""
        self.bridge = bridge
        self.id_json = id_json
        self.modern = modern
        self.session = session
        self.tool = tool
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
            self._finish(jsonrpc_result(self.id_json, encode_json(members)))

    def call_error(self, text: str) -> None:
        self._finish(jsonrpc_result(self.id_json, tool_error(text, self.modern)))

    def call_slow(self) -> None:
        self.exchange.start_stream((*SSE_HEADERS, *self.cors))
        self.exchange.stream(KEEPALIVE)

    def call_tick(self) -> None:
        self.exchange.stream(KEEPALIVE)

    def call_progress(self, report: Report) -> None:
        if self.streaming:  # the bridge started the stream for it
            self.exchange.stream(sse_event(progress_notification(self.progress.token, report)))

    def _finish(self, body: bytes) -> None:
        if self.streaming:
            exchange = self.exchange
            exchange.stream(sse_event(body))
            exchange.end_stream()
        else:
            self.reply(body)

    def abandoned(self, now: float) -> None:
        """The agent hung up before the answer: the app gets `cancel` (docs/protocol.md, Mapping)."""
        self.bridge.abandon(self, now)  # type: ignore[union-attr]

    def named_by_cancel(self, request_id: bytes, session: bytes | None) -> bool:
        """A legacy call of this id, made in this session (compared as `session_key` reads it)."""
        return not self.modern and self.id_json == request_id and session_key(self.session) == session

    def cancelled(self, now: float) -> None:
        """A legacy `notifications/cancelled` named this call: `cancel` to the app, and end the answer."""
        self.bridge.abandon(self, now)  # type: ignore[union-attr]
        exchange = self.exchange
        exchange.on_abandon = None
        if self.streaming:
            exchange.end_stream()
        else:
            self.fail(200, self.id_json, REQUEST_CANCELLED, "Request cancelled")
