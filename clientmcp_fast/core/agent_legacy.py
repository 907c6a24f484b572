"""Requests of MCP 2025-03-26, 2025-06-18 and 2025-11-25: their methods, cancellation, and 2025-03-26 batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from msgspec import UNSET

from clientmcp_fast.core import jsonrpc
from clientmcp_fast.core.agent_context import JSON_HEADERS, Context, session_key
from clientmcp_fast.core.agent_eras import LATEST_LEGACY, LEGACY, SERVER_INFO, UNNAMED_LEGACY
from clientmcp_fast.core.agent_tools import instructions, tools_call, tools_list
from clientmcp_fast.core.http import MCP_PROTOCOL_VERSION, MCP_SESSION_ID, Exchange, Headers
from clientmcp_fast.core.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NULL_ID,
    Message,
    Params,
    encode_json,
    valid_id,
)
from clientmcp_fast.core.limits import MAX_BATCH_ELEMENTS
from clientmcp_fast.speedups import json_member, jsonrpc_result

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge


def serve_legacy(
    bridge: Bridge, context: Context, message: Message, params: Params, meta: object, now: float
) -> None:
    """A legacy request, notification or response, alone or as one element of a batch; `meta` is `params.meta`."""
    method = message.method
    bridge.counters.request(False, method)
    raw_id = message.id
    if raw_id is UNSET:
        if isinstance(method, str):
            if method == "notifications/cancelled":
                _cancel(bridge, context, params, now)
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
        # The session as sent: only a cancellation compares it (see session_key), not every call.
        tools_call(
            bridge,
            context,
            id_json,
            params.name,
            params,
            meta,
            False,
            context.exchange.request.header(MCP_SESSION_ID),
            now,
        )
    elif method == "tools/list":
        tools_list(bridge, context, id_json, params, False)
    elif method == "initialize":
        _initialize(bridge, context, id_json, params)
    elif method == "ping":
        context.reply(jsonrpc_result(id_json, b"{}"))
    else:
        context.fail(200, id_json, METHOD_NOT_FOUND, f"Method not found: {method}")


def _initialize(bridge: Bridge, context: Context, id_json: bytes, params: Params) -> None:
    asked = json_member(params.protocolVersion)
    version = asked if asked in LEGACY else LATEST_LEGACY
    body = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": SERVER_INFO,
    }
    text = instructions(bridge, context.client_id)
    if text is not None:
        body["instructions"] = text
    # The session id only namespaces the ids a notifications/cancelled names (ClientMCP v1 §4.1).
    session = bridge.new_session_id()
    context.reply(jsonrpc_result(id_json, encode_json(body)), ((b"mcp-session-id", session),))


# -- notifications/cancelled (docs/protocol.md, Mapping) ---------------------------------------


def _cancel(bridge: Bridge, context: Context, params: Params, now: float) -> None:
    """Cancel the legacy call of this client ID and session that the id names (docs/protocol.md, Mapping)."""
    request_id = valid_id(params.requestId)
    if request_id is None:
        return
    session = session_key(context.exchange.request.header(MCP_SESSION_ID))
    if not cancel_call(bridge, context.client_id, request_id, session, now):
        # Behind a load balancer, the call may be waiting on another instance (docs/scaling.md).
        bridge.router.cancel_elsewhere(context.client_id, request_id, session)


def cancel_call(bridge: Bridge, client_id: str, request_id: bytes, session: bytes | None, now: float) -> bool:
    """Cancel the legacy call of this client ID, id and session waiting here; False when there is none."""
    app = bridge.apps.get(client_id)
    if app is None:
        return False
    # A scan of the app's calls, not an index: cancellations are rare, calls are not.
    for call in app.calls.values():
        if call.named_by_cancel(request_id, session):
            call.cancelled(now)  # type: ignore[attr-defined]
            return True
    return False


# -- 2025-03-26 batches ------------------------------------------------------------------------


def serve_batch(bridge: Bridge, context: Context, elements: list[msgspec.Raw] | None, now: float) -> None:
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
    _Batch(bridge, context, elements, now)


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

    def __init__(self, bridge: Bridge, context: Context, elements: list[msgspec.Raw], now: float) -> None:
        self.context = context
        self.answers: list[bytes | None] = [None] * len(elements)
        self.waiting = len(elements)
        self.exchanges = [_BatchExchange(self, index) for index in range(len(elements))]
        context.exchange.on_abandon = self._abandoned
        for index, raw in enumerate(elements):
            # JSON in each element, never SSE: the batch answer is one JSON array.
            element = Context.__new__(Context)
            element.init_context(self.exchanges[index], context.grant, (), True, False)
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
            params = message.params
            serve_legacy(bridge, element, message, params, params.meta, now)

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

    def _abandoned(self, now: float) -> None:
        for exchange in self.exchanges:
            if exchange.on_abandon is not None:
                exchange.on_abandon(now)
