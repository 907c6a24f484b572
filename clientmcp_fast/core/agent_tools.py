"""tools/list and tools/call as both eras map them onto the bridge (docs/protocol.md, Mapping)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import UNSET

from clientmcp_fast.core.agent_context import Context, tool_error
from clientmcp_fast.core.agent_eras import MODERN_LIST_TAIL
from clientmcp_fast.core.counters import REFUSED_CONCURRENCY, REFUSED_SCOPE
from clientmcp_fast.core.http import TRACEPARENT, TRACESTATE
from clientmcp_fast.core.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, Meta, Params, valid_id
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.param_headers import param_header_problem
from clientmcp_fast.core.progress import Progress
from clientmcp_fast.core.register import scoped_tools_json
from clientmcp_fast.core.tracing import valid_traceparent, valid_tracestate
from clientmcp_fast.speedups import first_byte, json_member, jsonrpc_result

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge


def instructions(bridge: Bridge, client_id: str) -> str | None:
    """The instructions of the app of this client ID, if it is online and gave any."""
    app = bridge.apps.get(client_id)
    return app.toolset.instructions if app is not None and app.toolset is not None else None


def tools_list(bridge: Bridge, context: Context, id_json: bytes, params: Params, modern: bool) -> None:
    """A tools/list: the app's latest tools within the token's scope, one page; none when it is offline."""
    cursor = json_member(params.cursor)
    if cursor is not UNSET and cursor is not None:
        context.fail(400 if modern else 200, id_json, INVALID_PARAMS, "Invalid params: unknown cursor")
        return
    app = bridge.apps.get(context.client_id)
    toolset = app.toolset if app is not None else None
    tools = b"[]"
    if toolset is not None:
        scope = context.grant.scope
        tools = toolset.tools_json if scope is None else scoped_tools_json(toolset, scope)
    if modern:
        context.reply(
            jsonrpc_result(id_json, b'{"resultType":"complete","tools":' + tools + MODERN_LIST_TAIL)
        )
    else:
        context.reply(jsonrpc_result(id_json, b'{"tools":' + tools + b"}"))


def tools_call(
    bridge: Bridge,
    context: Context,
    id_json: bytes,
    name: object,
    params: Params,
    meta: object,
    modern: bool,
    session: bytes | None,
    now: float,
) -> None:
    """A tools/call; `name` is `params.name` and `meta` is `params.meta` (see `decode_body`), read by the caller."""
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
    tracing = bridge.tracing is not None
    if tracing:
        _take_trace(context, meta)  # before any refusal: the span of a refused call has its parent too
    app = bridge.apps.get(context.client_id)
    if app is None:
        _refused(bridge, context, name, modern, Outcome.OFFLINE)
        context.reply(jsonrpc_result(id_json, tool_error(Outcome.OFFLINE.text, modern)))
        return
    toolset = app.toolset
    if toolset is None:
        _refused(bridge, context, name, modern, Outcome.NOT_REGISTERED)
        context.reply(jsonrpc_result(id_json, tool_error(app.unregistered_text(), modern)))
        return
    tools = toolset.tools
    tool = tools.get(name)
    grant = context.grant
    scope = grant.scope
    if scope is not None and tool is not None and not scope.allows(name):
        # Outside the token's scope: answered exactly as a tool the app does not have, so that
        # nothing tells the agent it exists (docs/protocol.md, Scoped agent tokens); only the metrics tell.
        bridge.refused_agent(REFUSED_SCOPE, context.client_id, now)
        tool = None
    if tool is None:
        _refused(bridge, context, name, modern, Outcome.UNKNOWN_TOOL)
        context.fail(error_status, id_json, INVALID_PARAMS, f"Unknown tool: {name}")
        return
    if toolset.extended:  # the extensions of docs/protocol.md: Progress, and Trace context
        if toolset.progress and not _take_progress(context, meta, error_status, id_json):
            return
        if toolset.trace and not tracing:
            _take_trace(context, meta)
    if modern and tool.header_params:
        request = context.exchange.request
        problem = param_header_problem(tool.header_params, arguments, request.headers, request.repeated)
        if problem is not None:
            context.fail(400, id_json, HEADER_MISMATCH, problem)
            return
    limit = bridge.max_calls_per_token
    if limit and grant.in_flight >= limit:
        bridge.refused_agent(REFUSED_CONCURRENCY, context.client_id, now)
        context.too_many(
            id_json,
            1,  # a call ends at the latest at the call timeout; an agent looks again in a second
            f"Too many calls in flight: this agent token may have {limit} at once; retry after 1 s",
        )
        return
    context.start_call(bridge, app, tool, arguments, modern, id_json, session, now)


def _take_progress(context: Context, meta: object, error_status: int, id_json: bytes) -> bool:
    """The agent's progress token, if it gave one (docs/protocol.md, Progress); False after answering -32602."""
    if type(meta) is not Meta:
        return True
    token = meta.progressToken
    if token is UNSET:
        return True
    token = valid_id(token)
    if token is None:
        context.fail(
            error_status,
            id_json,
            INVALID_PARAMS,
            "Invalid params: _meta.progressToken must be a string or a number",
        )
        return False
    if context.wants_stream:  # else there is no stream to carry it: reports are dropped
        context.progress = Progress(token)
    return True


def _take_trace(context: Context, meta: object) -> None:
    """The agent's trace context, from `_meta` or else the headers; a malformed one is dropped (docs/protocol.md)."""
    if type(meta) is Meta and meta.traceparent is not UNSET:
        _check_trace(context, meta.traceparent, meta.tracestate)
        return
    request = context.exchange.request
    traceparent = request.header(TRACEPARENT)
    if traceparent is None or b"traceparent" in request.repeated:
        return  # none, or two: which one is meant cannot be told, so neither is taken
    size = len(traceparent)
    if size and (_blank(traceparent[0]) or _blank(traceparent[size - 1])):
        traceparent = traceparent.strip(b" \t")  # compiled, the test is two C reads: most values have none
    # Several tracestate headers arrive joined by commas, as §3.3.1 says they combine (their
    # members' whitespace is the tracestate check's to take off; a value's, the strip's).
    tracestate = request.header(TRACESTATE)
    _check_trace(context, traceparent, None if tracestate is None else tracestate.decode("latin-1"))


def _blank(byte: int) -> bool:
    """Whether a byte is optional whitespace around a header's value (RFC 9110 §5.6.3)."""
    return byte == 0x20 or byte == 0x09


def _check_trace(context: Context, traceparent: object, tracestate: object) -> None:
    """Keep the trace context if its traceparent is valid; its tracestate only if that is valid too."""
    checked = valid_traceparent(traceparent)
    if checked is not None:
        context.traceparent = checked
        if tracestate is not None and tracestate is not UNSET:
            context.tracestate = valid_tracestate(tracestate)


def _refused(bridge: Bridge, context: Context, name: str, modern: bool, outcome: Outcome) -> None:
    """Count and log a call answered without reaching an app; the answer is the caller's to send."""
    context.tool = name
    context.modern = modern
    bridge.refused_call(context, outcome)
