"""The app side of ClientMCP: connect with a token, expose tools, answer the bridge's calls (ClientMCP v1 §3).

    app = ClientMCP("ws://127.0.0.1:8080/connect", token)
    app.expose("add_todo", handler=add_todo, description="Add a todo",
               input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
               risk="operate")
    async with app:          # connects, registers, waits for `registered`
        await app.closed()   # calls are answered concurrently until the connection ends

A handler is `async def handler(arguments: dict) -> result`, or `async def handler(arguments,
call)` to be given the call's `ToolCall`: its trace context (`call.traceparent`,
`call.tracestate`) and `await call.report(progress, total, message)`, which tells the agent
how far along the call is (docs/apps.md, Progress and trace context). The result may be a
full CallToolResult (a dict with `content`), a string (one text block), None ("Done."), or
anything else JSON can carry (sent as JSON text; a dict also as `structuredContent`). An
exception becomes a tool error the model can read. A `cancel` from the bridge cancels the
handler's task. With OpenTelemetry's API installed, each handler runs in a span
`execute_tool <name>`, the child of the agent's trace. Connects, closes and reconnects are
logged to the `clientmcp.client` logger. docs/apps.md documents the library.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import inspect
import json
import logging
import math
import os
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import websockets
from websockets.asyncio.client import ClientConnection

from clientmcp_fast.core.limits import MAX_MESSAGE_BYTES
from clientmcp_fast.core.progress import MAX_PROGRESS_MESSAGE_CHARS

Handler = Callable[[dict[str, Any]], Awaitable[Any]] | Callable[[dict[str, Any], "ToolCall"], Awaitable[Any]]
TokenSource = str | Callable[[], str | Awaitable[str]]

# Connects, closes, reconnects and refusals, for the app's developer: `logging.basicConfig(level="INFO")`.
logger = logging.getLogger("clientmcp.client")

SUBPROTOCOL = "clientmcp.v1"
PING = '{"type":"ping"}'
RISK_META = "io.github.clientmcp/risk"

# docs/apps.md, Risk levels (ClientMCP v1 §9.1): the MCP annotations each risk level implies.
RISK_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "observe": {"readOnlyHint": True},
    "operate": {"readOnlyHint": False, "destructiveHint": False},
    "manage": {"destructiveHint": True, "idempotentHint": True},
    "transact": {"destructiveHint": True, "idempotentHint": False, "openWorldHint": True},
}

# Close codes after which reconnecting cannot help (docs/protocol.md, Close codes): replaced (MUST NOT),
# a protocol bug, and a refused token (unless a token function can mint a new one).
_NO_RECONNECT = {4409, 4400, 1007, 1002}

# What a close code says happened, in the words of docs/protocol.md.
CLOSE_MEANINGS = {
    1000: "a normal close",
    1001: "the bridge is shutting down",
    1002: "a framing error",
    1005: "no close code given",
    1006: "the connection dropped without a close frame",
    1007: "a text message that is not UTF-8",
    1009: "a message over 4 MiB",
    1011: "an unexpected condition",
    4400: "a protocol error",
    4401: "the token was refused",
    4408: "the app was silent for too long",
    4409: "replaced by a newer connection with the same client ID",
    4429: "the app did not read what the bridge sent",
}


def describe_close(code: int, reason: str) -> str:
    """A close in words: `closed with 4401 (the token was refused): bad signature`."""
    meaning = CLOSE_MEANINGS.get(code)
    text = f"closed with {code}" + (f" ({meaning})" if meaning else "")
    return f"{text}: {reason}" if reason else text


def describe_connect_error(error: BaseException) -> str:
    """Why a connection could not be opened, in words rather than an exception's repr."""
    if isinstance(error, websockets.InvalidStatus):
        return f"the server answered HTTP {error.response.status_code} instead of accepting a WebSocket"
    if isinstance(error, websockets.InvalidURI):
        return "the URL is not a ws:// or wss:// URL"
    if isinstance(error, websockets.InvalidHandshake):
        return f"the server refused the WebSocket handshake: {error}"
    if isinstance(error, TimeoutError):
        return "the WebSocket handshake did not complete in time"
    # asyncio folds the failures of several addresses (localhost: ::1 and 127.0.0.1) into one
    # OSError without an errno, its text listing each one's.
    codes = {error.errno} if isinstance(error, OSError) and error.errno else set()
    codes = codes or {int(code) for code in re.findall(r"\[Errno (\d+)\]", str(error))}
    if codes == {errno.ECONNREFUSED}:
        return "connection refused: nothing listens there (is the bridge running?)"
    if len(codes) == 1:
        return os.strerror(codes.pop())
    return str(error)


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    """A CallToolResult with one text block."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


# The outcome's own members: an app's further data must not use these names (ClientMCP v1 §9.2).
OUTCOME_MEMBERS = frozenset({"status", "operation", "reason"})


def _outcome(status: str, data: dict[str, Any], **own: Any) -> dict[str, Any]:
    taken = sorted(OUTCOME_MEMBERS & data.keys())
    if taken:
        raise ValueError(f"{', '.join(taken)}: a member of the outcome itself, not free for the app's data")
    return {"status": status, **own, **data}


def completed(message: str = "Done.", **data: Any) -> dict[str, Any]:
    """Outcome `completed`: the change holds, seen in the app's own state (ClientMCP v1 §9.2)."""
    return {**text_result(message), "structuredContent": _outcome("completed", data)}


def accepted(operation: str, message: str = "Started.", **data: Any) -> dict[str, Any]:
    """Outcome `accepted`: it started and goes on as `operation` (ClientMCP v1 §9.2)."""
    return {**text_result(message), "structuredContent": _outcome("accepted", data, operation=operation)}


def rejected(code: str, detail: str, **data: Any) -> dict[str, Any]:
    """Outcome `rejected`: nothing changed; `code` is for the agent, `detail` for a reader (ClientMCP v1 §9.2)."""
    return {
        **text_result(detail, is_error=True),
        "structuredContent": _outcome("rejected", data, reason={"code": code, "detail": detail}),
    }


def _tools(count: int) -> str:
    return "1 tool" if count == 1 else f"{count} tools"


def _as_result(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value
    if isinstance(value, str):
        return text_result(value)
    if value is None:
        return text_result("Done.")
    result = text_result(json.dumps(value, ensure_ascii=False))
    if isinstance(value, dict):
        result["structuredContent"] = value
    return result


def _takes_call(handler: Handler) -> bool:
    """Whether `handler` takes a second positional parameter, the call's `ToolCall`."""
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some builtins): called as it always was
        return False
    positional = 0
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return True
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


@dataclass
class ExposedTool:
    """A tool the app declares, and the function that runs it."""

    definition: dict[str, Any]
    handler: Handler
    takes_call: bool = False  # the handler is called as handler(arguments, call)


def _check_number(value: object, name: str) -> None:
    # The bridge reads a number as a double and refuses what is not finite (close 4400); bool
    # is an int to Python but not a number to JSON.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    try:
        finite = math.isfinite(value)
    except OverflowError:
        raise ValueError(f"{name} must be a finite number, not an integer beyond a double's range") from None
    if not finite:
        raise ValueError(f"{name} must be a finite number, not {value!r}")


class ToolCall:
    """One call a handler answers, its second parameter: the call's trace context, and progress reports."""

    __slots__ = ("id", "name", "traceparent", "tracestate", "_conn", "_client", "_task")

    def __init__(
        self,
        call_id: str,
        name: str,
        traceparent: str | None,
        tracestate: str | None,
        conn: _Connection,
        client: ClientMCP,
    ) -> None:
        self.id = call_id
        self.name = name
        # W3C Trace Context of the agent's request (or of the bridge's span), when the bridge sent it.
        self.traceparent = traceparent
        self.tracestate = tracestate
        self._conn = conn
        self._client = client
        self._task: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"ToolCall(id={self.id!r}, name={self.name!r})"

    async def report(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the agent how far this call is (`progress` of `total`, and a line for a person).

        A bad value raises TypeError or ValueError here, rather than the bridge closing the
        connection. Once the call is answered or cancelled, or its connection is gone, a report
        is dropped without a word: a handler need not know whether its agent is still there.
        """
        _check_number(progress, "progress")
        report: dict[str, Any] = {"type": "progress", "id": self.id, "progress": progress}
        if total is not None:
            _check_number(total, "total")
            report["total"] = total
        if message is not None:
            if not isinstance(message, str):
                raise TypeError(f"message must be a string, not {type(message).__name__}")
            if len(message) > MAX_PROGRESS_MESSAGE_CHARS:
                raise ValueError(
                    f"message must be at most {MAX_PROGRESS_MESSAGE_CHARS} characters, not {len(message)}"
                )
            report["message"] = message
        if self._conn.calls.get(self.id) is not self:
            return
        await self._client._send(self._conn, json.dumps(report, ensure_ascii=False, separators=(",", ":")))


class _Tracing:
    """OpenTelemetry's API, when the app's process has it: a span around each handler's run."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.trace = trace
        self.empty = context.Context()
        # W3C Trace Context is what the bridge sends, whatever propagator the app configured globally.
        self.propagator = TraceContextTextMapPropagator()
        self.error = trace.Status(trace.StatusCode.ERROR)

    def span(self, call: ToolCall) -> contextlib.AbstractContextManager[Any]:
        """The span `execute_tool <name>` for `call`, made current, the child of the call's trace context.

        Without one it starts a trace of its own, rather than joining whatever span was current
        when the app connected.
        """
        carrier = {}
        if call.traceparent is not None:
            carrier["traceparent"] = call.traceparent
            if call.tracestate is not None:
                carrier["tracestate"] = call.tracestate
        parent = self.propagator.extract(carrier, context=self.empty)
        # The tracer is looked up per call: the app may set its TracerProvider after connecting.
        tracer = self.trace.get_tracer("clientmcp_fast.client")
        return tracer.start_as_current_span(
            f"execute_tool {call.name}",
            context=parent,
            kind=self.trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "mcp.method.name": "tools/call",
            },
            # What ends the handler is ours to say: a cancel is not an error, an exception is.
            record_exception=False,
            set_status_on_exception=False,
        )

    def failed(self, span: Any, error: Exception) -> None:
        """The handler raised `error`: the span records it and ends in error."""
        cls = type(error)
        name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
        span.record_exception(error)
        span.set_attribute("error.type", name)  # OpenTelemetry's conventions: the class's full name
        span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, f"{cls.__name__}: {error}"))

    def tool_error(self, span: Any) -> None:
        """The handler answered a tool error (`isError`): the span ends in error, as MCP's semantic conventions say."""
        span.set_attribute("error.type", "tool_error")
        span.set_status(self.error)


# OpenTelemetry, imported at the first call answered: None until then, False when it is not installed.
_tracing: _Tracing | Literal[False] | None = None


def _opentelemetry() -> _Tracing | None:
    """The span maker, or None when the app's process has no OpenTelemetry API; imported once."""
    global _tracing
    if _tracing is None:
        try:
            _tracing = _Tracing()
        except ImportError:
            _tracing = False
    return _tracing or None


@dataclass
class _Connection:
    ws: ClientConnection
    last_sent: float
    last_heard: float
    calls: dict[str, ToolCall] = field(default_factory=dict)  # being answered, by call id
    sending: set[asyncio.Task] = field(default_factory=set)  # registers sent from sync code
    registered_at: float | None = None  # when the bridge first answered `registered`

    def forget(self, call: ToolCall) -> None:
        """`call` is over: its reports are dropped from now on."""
        if self.calls.get(call.id) is call:
            del self.calls[call.id]


@dataclass(frozen=True)
class AuthorizeRequest:
    """An OAuth client asks to use this app's tools (docs/oauth.md): show it to the user, with the code."""

    id: str
    client_name: str | None  # as the client registered it: it chooses it, so show the origin too
    client_origin: str  # where the client gets its answer: `https://host`, `http://127.0.0.1:PORT`, `cursor:`
    code: str  # the 8 characters the user types into the bridge's page


AuthorizeHandler = Callable[[AuthorizeRequest], Awaitable[bool] | bool]


class ClientMCP:
    """One app's connection to a bridge, kept open, re-registered and answered."""

    def __init__(
        self,
        url: str,
        token: TokenSource,
        *,
        instructions: str | None = None,
        ping_interval: float = 25.0,
        pong_timeout: float = 10.0,
        reconnect: bool = True,
        backoff: tuple[float, float] = (0.5, 30.0),
        on_authorize: AuthorizeHandler | None = None,
    ) -> None:
        self.url = url
        self._token = token
        self.instructions = instructions
        self.ping_interval = ping_interval
        self.pong_timeout = pong_timeout
        self.reconnect = reconnect
        self.backoff = backoff
        self.tools: dict[str, ExposedTool] = {}
        self.close_code: int | None = None
        self.close_reason = ""
        # The last failure to connect, or the last close, in words (None while all is well).
        self.last_error: str | None = None
        self._attempts = 0  # connection attempts since connect()
        self.calls_cancelled = 0
        self._conn: _Connection | None = None
        self._registered = asyncio.Event()
        self._pending_registers = 0
        self._runner: asyncio.Task | None = None
        self._stopping = False
        self._done = asyncio.Event()
        self._on_authorize = on_authorize

    @property
    def on_authorize(self) -> AuthorizeHandler | None:
        """Who answers an OAuth client's request (`authorize`): True to allow; set, the app registers `consent`."""
        return self._on_authorize

    @on_authorize.setter
    def on_authorize(self, handler: AuthorizeHandler | None) -> None:
        declared = self._on_authorize is not None
        self._on_authorize = handler
        if declared != (handler is not None):
            self._register_if_connected()

    # -- declaring tools --------------------------------------------------------------------

    def expose(
        self,
        name: str,
        handler: Handler,
        *,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        risk: str | None = None,
        **members: Any,
    ) -> None:
        """Declare (or replace) a tool; if connected, the new tool set is registered at once."""
        definition: dict[str, Any] = {"name": name}
        if description is not None:
            definition["description"] = description
        definition["inputSchema"] = input_schema or {"type": "object"}
        if risk is not None:
            if risk not in RISK_ANNOTATIONS:
                raise ValueError(f"risk must be one of {', '.join(RISK_ANNOTATIONS)}")
            definition["annotations"] = {**RISK_ANNOTATIONS[risk], **members.pop("annotations", {})}
            definition["_meta"] = {**members.pop("_meta", {}), RISK_META: risk}
        definition.update(members)
        self.tools[name] = ExposedTool(definition, handler, _takes_call(handler))
        self._register_if_connected()

    def remove(self, name: str) -> None:
        """Withdraw a tool; if connected, the new tool set is registered at once."""
        self.tools.pop(name, None)
        self._register_if_connected()

    def register_message(self) -> str:
        """The register message declaring the current tool set (ClientMCP v1 §3.2)."""
        message: dict[str, Any] = {
            "type": "register",
            "tools": [tool.definition for tool in self.tools.values()],
        }
        if self.instructions is not None:
            message["instructions"] = self.instructions
        if self._on_authorize is not None:
            message["consent"] = True
        # Always: a handler may report at any time, and may read the trace context. A bridge
        # before these extensions ignores both (ClientMCP v1 §3.2); one after sends the trace
        # context only when the agent's request had one or the bridge traces itself.
        message["progress"] = True
        message["trace"] = True
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"))

    # -- connecting -------------------------------------------------------------------------

    async def __aenter__(self) -> ClientMCP:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self, timeout: float = 10.0) -> None:
        """Connect and register; returns once the bridge answered `registered` (ClientMCP v1 §3.2).

        Raises ConnectionError, saying why in words, when that has not happened within
        `timeout` seconds (attempts are retried with the backoff meanwhile) or when the
        connection ended for good before it.
        """
        self._stopping = False
        self._done.clear()
        self._registered.clear()
        self.last_error = None
        self._attempts = 0
        self._runner = asyncio.get_running_loop().create_task(self._run())
        registered = asyncio.ensure_future(self._registered.wait())
        finished = asyncio.ensure_future(self._done.wait())
        try:
            await asyncio.wait({registered, finished}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller is going away (Ctrl-C under asyncio.run, a task cancelled at startup): the
            # runner must not stay connected behind it, registered and answering calls.
            await self._stop(abort=True)
            raise
        finally:
            registered.cancel()
            finished.cancel()
        if registered.done() and not registered.cancelled():
            return
        gave_up = self._done.is_set()
        connected = self._conn is not None
        await self._stop(abort=True)
        if gave_up:
            raise ConnectionError(
                f"not registered with {self.url}: {self.last_error or 'the connection ended'}"
            )
        if connected:
            why = ": connected, but the bridge did not answer the register"
        else:
            tries = "1 attempt" if self._attempts == 1 else f"{self._attempts} attempts"
            why = f", after {tries}: {self.last_error or 'still connecting'}"
        raise ConnectionError(f"not registered with {self.url} within {timeout:g} s{why}")

    async def close(self) -> None:
        """Close the connection (1000) and stop reconnecting."""
        await self._stop(abort=False)

    async def _stop(self, *, abort: bool) -> None:
        self._stopping = True
        runner, self._runner = self._runner, None
        try:
            if self._conn is not None and not abort:
                await self._conn.ws.close()
            elif runner is not None:
                # Connecting, waiting to reconnect, or past connect()'s deadline: nothing to close
                # gracefully, or no time left to.
                runner.cancel()
            if runner is not None:
                await asyncio.wait({runner})  # unlike awaiting it, does not raise its CancelledError
        except asyncio.CancelledError:
            # Cancelled while the bridge had yet to answer our close: nothing else would ever end a
            # connection whose peer stays silent, so it is dropped now (another close() may hold
            # the runner).
            if self._conn is not None:
                self._conn.ws.transport.abort()
            if runner is not None:
                runner.cancel()
                await asyncio.wait({runner})
            raise

    async def closed(self) -> None:
        """Wait until the connection ended for good (no reconnect follows)."""
        await self._done.wait()

    async def wait_registered(self) -> None:
        """Wait until every register sent so far was answered with `registered`."""
        await self._registered.wait()

    async def _token_value(self) -> str:
        token = self._token() if callable(self._token) else self._token
        return await token if isinstance(token, Awaitable) else token  # type: ignore[return-value]

    async def _run(self) -> None:
        delay = self.backoff[0]
        try:
            while not self._stopping:
                self._attempts += 1
                logger.debug("connecting to %s", self.url)
                try:
                    token = await self._token_value()
                except Exception as error:  # the app's own function: report it and try again later
                    self.close_code, self.close_reason = None, ""
                    self.last_error = f"the token function failed: {type(error).__name__}: {error}"
                    logger.warning("%s", self.last_error)
                else:
                    try:
                        ws = await websockets.connect(
                            self.url, subprotocols=[SUBPROTOCOL, token], max_size=MAX_MESSAGE_BYTES
                        )
                    except (OSError, websockets.InvalidHandshake, websockets.InvalidURI) as error:
                        self.close_code, self.close_reason = None, ""
                        self.last_error = describe_connect_error(error)
                        logger.warning("cannot connect to %s: %s", self.url, self.last_error)
                    else:
                        logger.info("connected to %s; registering %s", self.url, _tools(len(self.tools)))
                        if await self._serve(ws) >= self.backoff[1]:
                            # Only a connection that lasted as long as the longest wait starts the
                            # backoff over: one closed at the handshake (4429 at the app cap, a
                            # refused token) or soon after would otherwise be retried every 0.5 s.
                            delay = self.backoff[0]
                        self._log_close()
                if self._stopping:
                    return
                refusal = self._no_reconnect_reason()
                if refusal is not None:
                    logger.warning("not reconnecting to %s: %s", self.url, refusal)
                    return
                wait = delay * (0.5 + random.random())
                logger.info("reconnecting to %s in %.1f s (attempt %d)", self.url, wait, self._attempts + 1)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.backoff[1])
        finally:
            self._done.set()

    def _log_close(self) -> None:
        code = self.close_code if self.close_code is not None else 1006
        self.last_error = None if self._stopping else describe_close(code, self.close_reason)
        if self._stopping:
            logger.info("connection to %s %s", self.url, describe_close(code, self.close_reason))
        else:
            logger.warning("connection to %s %s", self.url, self.last_error)

    def _no_reconnect_reason(self) -> str | None:
        """Why no reconnect follows the connection that just ended, or None if one does."""
        if not self.reconnect:
            return "reconnect is off"
        if self.close_code == 4409:
            return "a newer connection with the same client ID replaced this one"
        if self.close_code in _NO_RECONNECT:
            return "the bridge refused what this app sent, and would again"
        if self.close_code == 4401 and not callable(self._token):
            return "the token was refused, and the same token would be again"
        return None

    async def _serve(self, ws: ClientConnection) -> float:
        """Run one connection until it ends; the seconds it stayed registered (0 if it never was)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        conn = _Connection(ws, now, now)
        self._conn = conn
        self._registered.clear()
        self._pending_registers = 0
        pinger = asyncio.get_running_loop().create_task(self._keep_alive(conn))
        try:
            await self._send_register(conn)
            async for raw in ws:
                conn.last_heard = asyncio.get_running_loop().time()
                self._on_message(conn, raw)
        except websockets.ConnectionClosed:
            pass
        except asyncio.CancelledError:
            # connect() gave up on this connection, or a close was cancelled: no closing handshake.
            ws.transport.abort()
            raise
        finally:
            pinger.cancel()
            calls, conn.calls = list(conn.calls.values()), {}  # ended: their reports are dropped
            for call in calls:
                if call._task is not None:
                    call._task.cancel()
            self._conn = None
            self._registered.clear()  # whatever was registered ended with the connection
            close = ws.protocol.close_rcvd
            self.close_code = close.code if close is not None else 1006
            self.close_reason = close.reason if close is not None else ""
        return 0.0 if conn.registered_at is None else loop.time() - conn.registered_at

    async def _keep_alive(self, conn: _Connection) -> None:
        # ClientMCP v1 §3.2: ping after 25 s without sending; nothing heard within 10 s of a ping means a
        # dead link. Waiting for an answer never holds up the next ping.
        loop = asyncio.get_running_loop()
        unanswered: float | None = None  # when the oldest ping not yet followed by anything was sent
        while True:
            now = loop.time()
            if unanswered is not None and conn.last_heard >= unanswered:
                unanswered = None
            if unanswered is not None and now >= unanswered + self.pong_timeout:
                await conn.ws.close(1011, "no answer to ping")
                return
            if now - conn.last_sent >= self.ping_interval:
                await self._send(conn, PING)
                if unanswered is None:
                    unanswered = now
                continue
            wake = conn.last_sent + self.ping_interval
            if unanswered is not None:
                wake = min(wake, unanswered + self.pong_timeout)
            await asyncio.sleep(wake - now)

    def _register_if_connected(self) -> None:
        conn = self._conn
        if conn is not None:
            # Held until done: the loop keeps only a weak reference to a task.
            task = asyncio.get_running_loop().create_task(self._send_register(conn))
            conn.sending.add(task)
            task.add_done_callback(conn.sending.discard)

    async def _send_register(self, conn: _Connection) -> None:
        self._pending_registers += 1
        self._registered.clear()
        await self._send(conn, self.register_message())

    async def _send(self, conn: _Connection, text: str) -> None:
        conn.last_sent = asyncio.get_running_loop().time()
        with contextlib.suppress(websockets.ConnectionClosed):
            await conn.ws.send(text)

    def _on_message(self, conn: _Connection, raw: str | bytes) -> None:
        message = json.loads(raw)
        kind = message.get("type")
        if kind == "registered":
            if conn.registered_at is None:
                conn.registered_at = asyncio.get_running_loop().time()
            self._pending_registers -= 1
            if self._pending_registers <= 0:
                logger.debug("registered %s", _tools(len(self.tools)))
                self._registered.set()
        elif kind == "call":
            traceparent, tracestate = message.get("traceparent"), message.get("tracestate")
            call = ToolCall(
                message["id"],
                message["name"],
                traceparent if isinstance(traceparent, str) else None,
                tracestate if isinstance(tracestate, str) else None,
                conn,
                self,
            )
            call._task = asyncio.get_running_loop().create_task(
                self._answer(conn, call, message.get("arguments", {}))
            )
            conn.calls[call.id] = call
        elif kind == "cancel":
            call = conn.calls.pop(message["id"], None)
            if call is not None and call._task is not None:
                self.calls_cancelled += 1
                call._task.cancel()
        elif kind == "authorize":
            client = message.get("client") or {}
            request = AuthorizeRequest(
                message["id"], client.get("name"), client.get("uri", ""), message.get("code", "")
            )
            task = asyncio.get_running_loop().create_task(self._consent(conn, request))
            conn.sending.add(task)
            task.add_done_callback(conn.sending.discard)

    async def _consent(self, conn: _Connection, request: AuthorizeRequest) -> None:
        """Ask the app's handler about an OAuth request and answer `consent`; no handler or a failure denies."""
        allow = False
        handler = self._on_authorize
        if handler is not None:
            try:
                answer = handler(request)
                if inspect.isawaitable(answer):
                    answer = await answer
                allow = answer is True
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("on_authorize failed: the request of %s is denied", request.client_origin)
        await self._send(conn, json.dumps({"type": "consent", "id": request.id, "allow": allow}))

    async def _answer(self, conn: _Connection, call: ToolCall, arguments: dict[str, Any]) -> None:
        tool = self.tools.get(call.name)
        try:
            if tool is None:
                result = text_result(f"Unknown tool: {call.name}", is_error=True)
            else:
                result = await self._handle(tool, arguments, call)
            payload = json.dumps({"type": "result", "id": call.id, "result": result}, ensure_ascii=False)
            if len(payload.encode("utf-8")) > MAX_MESSAGE_BYTES:
                payload = json.dumps(
                    {
                        "type": "result",
                        "id": call.id,
                        "result": text_result(
                            "The result is too large to deliver (over 4 MiB).", is_error=True
                        ),
                    }
                )
            conn.forget(call)  # answered: a report from now on would come after the result
            await self._send(conn, payload)
        finally:
            conn.forget(call)

    async def _handle(self, tool: ExposedTool, arguments: dict[str, Any], call: ToolCall) -> dict[str, Any]:
        """The handler's answer as a CallToolResult, in its span if OpenTelemetry is there."""
        tracing = _opentelemetry()
        with contextlib.nullcontext() if tracing is None else tracing.span(call) as span:
            try:
                if tool.takes_call:
                    value = await tool.handler(arguments, call)  # type: ignore[call-arg]
                else:
                    value = await tool.handler(arguments)  # type: ignore[call-arg]
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the model learns why the tool failed
                if tracing is not None:
                    tracing.failed(span, error)
                return text_result(f"{type(error).__name__}: {error}", is_error=True)
            result = _as_result(value)
            if tracing is not None and result.get("isError") is True:
                tracing.tool_error(span)
            return result
