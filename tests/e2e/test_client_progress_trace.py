"""`clientmcp_fast.client`'s side of progress and trace context (docs/apps.md, Progress and trace context).

The app is `ClientMCP`; the bridge is one written here on `websockets`, so that each test
sees the exact text the library sends and chooses the exact `call` it receives. The
OpenTelemetry span is read from the SDK's in-memory exporter, set as the global
tracer provider for one test at a time.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import json
import math
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets
from agents import MODERN, nothing_leaks, online_app, sdk_agent
from mcp.types import TextContent
from websockets.asyncio.server import serve

from clientmcp_fast import client as client_module
from clientmcp_fast.client import ClientMCP, ToolCall, rejected, text_result

pytestmark = pytest.mark.anyio

WAIT = 10.0
PING = '{"type":"ping"}'
# W3C Trace Context's own example values (§3.2.2, §3.3.1).
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


class FakeBridge:
    """A bridge by hand: answers the register, sends the calls a test gives it, keeps what the app sends."""

    def __init__(self) -> None:
        self.registers: list[str] = []
        self.heard: asyncio.Queue[str] = asyncio.Queue()
        self.ws: Any = None

    async def serve(self, ws: Any) -> None:
        self.ws = ws
        self.registers.append(await ws.recv())
        await ws.send('{"type":"registered"}')
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in ws:
                if raw != PING:
                    await self.heard.put(raw)

    async def call(self, call_id: str, name: str, **members: Any) -> None:
        await self.ws.send(
            json.dumps({"type": "call", "id": call_id, "name": name, "arguments": {}, **members})
        )

    async def next(self) -> str:
        """The next text the app sent (pings aside)."""
        return await asyncio.wait_for(self.heard.get(), WAIT)

    async def result(self, call_id: str) -> dict[str, Any]:
        """The next message, which must be the result of `call_id`: its CallToolResult."""
        message = json.loads(await self.next())
        assert (message["type"], message["id"]) == ("result", call_id), message
        return message["result"]


@contextlib.asynccontextmanager
async def connected(tools: dict[str, Any], **options: Any) -> AsyncIterator[tuple[FakeBridge, ClientMCP]]:
    """An app exposing `tools` (name -> handler), registered with a fake bridge."""
    bridge = FakeBridge()
    async with serve(bridge.serve, "127.0.0.1", 0, subprotocols=["clientmcp.v1"]) as server:
        app = ClientMCP(
            f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/connect", "t", reconnect=False, **options
        )
        for name, handler in tools.items():
            app.expose(name, handler)
        async with app:
            yield bridge, app


# -- the register --------------------------------------------------------------------------------


async def _echo(arguments: dict) -> str:
    return "ok"


async def test_the_register_declares_progress_and_trace():
    """Always, whatever else it declares: a bridge without these extensions ignores both (ClientMCP v1 §3.2)."""
    async with connected({"echo": _echo}) as (bridge, app):
        expected = (
            '{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}],'
            '"progress":true,"trace":true}'
        )
        assert bridge.registers == [expected]
        assert app.register_message() == expected
        app.instructions = "Say hi."
        app.on_authorize = lambda request: False  # while online: registered again, with consent
        assert await bridge.next() == (
            '{"type":"register","tools":[{"name":"echo","inputSchema":{"type":"object"}}],'
            '"instructions":"Say hi.","consent":true,"progress":true,"trace":true}'
        )


# -- call.report ---------------------------------------------------------------------------------


async def test_each_report_sends_one_progress_message_for_its_call():
    """`report(progress, total, message)`: the members given, numbers as the handler gave them."""
    at_limit = "ü " + "x" * 1022  # 1024 characters, more bytes

    async def counts(arguments: dict, call: ToolCall) -> str:
        await call.report(1, 4, "one")
        await call.report(2.5)
        await call.report(3, total=4.0)
        await call.report(4, message=at_limit)
        return "counted"

    async with connected({"count": counts}) as (bridge, _):
        await bridge.call("c1", "count")
        assert [await bridge.next() for _ in range(4)] == [
            '{"type":"progress","id":"c1","progress":1,"total":4,"message":"one"}',
            '{"type":"progress","id":"c1","progress":2.5}',
            '{"type":"progress","id":"c1","progress":3,"total":4.0}',
            '{"type":"progress","id":"c1","progress":4,"message":"' + at_limit + '"}',
        ]
        assert await bridge.result("c1") == text_result("counted")


BAD_REPORTS = [
    ({"progress": True}, TypeError, "progress must be a number, not bool"),
    ({"progress": "1"}, TypeError, "progress must be a number, not str"),
    ({"progress": None}, TypeError, "progress must be a number, not NoneType"),
    ({"progress": math.nan}, ValueError, "progress must be a finite number, not nan"),
    ({"progress": math.inf}, ValueError, "progress must be a finite number, not inf"),
    (
        {"progress": 10**400},
        ValueError,
        "progress must be a finite number, not an integer beyond a double's range",
    ),
    ({"progress": 1, "total": False}, TypeError, "total must be a number, not bool"),
    ({"progress": 1, "total": "4"}, TypeError, "total must be a number, not str"),
    ({"progress": 1, "total": -math.inf}, ValueError, "total must be a finite number, not -inf"),
    ({"progress": 1, "message": 5}, TypeError, "message must be a string, not int"),
    ({"progress": 1, "message": b"one"}, TypeError, "message must be a string, not bytes"),
    ({"progress": 1, "message": "x" * 1025}, ValueError, "message must be at most 1024 characters, not 1025"),
]


@pytest.mark.parametrize(("report", "error", "text"), BAD_REPORTS, ids=[text for _, _, text in BAD_REPORTS])
async def test_a_bad_report_raises_in_the_handler_and_sends_nothing(report, error, text):
    """What the bridge would close the connection for (4400) is the handler's exception instead."""
    raised: list[BaseException] = []

    async def reports(arguments: dict, call: ToolCall) -> str:
        try:
            await call.report(**report)
        except (TypeError, ValueError) as caught:
            raised.append(caught)
        return "after"

    async with connected({"report": reports}) as (bridge, app):
        await bridge.call("c1", "report")
        assert await bridge.result("c1") == text_result("after")  # the first thing sent
        assert app.close_code is None
    assert [(type(caught), str(caught)) for caught in raised] == [(error, text)]


async def test_a_report_after_the_result_is_dropped():
    """Once answered, a call's reports go nowhere, and raise nothing; bad values still raise."""
    kept: list[ToolCall] = []

    async def keeps(arguments: dict, call: ToolCall) -> str:
        kept.append(call)
        return "done"

    async with connected({"keep": keeps}) as (bridge, _):
        await bridge.call("c1", "keep")
        assert await bridge.result("c1") == text_result("done")
        await kept[0].report(1, 2, "late")
        with pytest.raises(TypeError, match="^progress must be a number, not bool$"):
            await kept[0].report(True)
        await bridge.call("c2", "keep")
        assert await bridge.result("c2") == text_result("done")  # nothing came in between


async def test_a_report_after_a_cancel_is_dropped():
    """A handler that reports while it is being cancelled sends nothing: the bridge is done with the call."""
    started, stopped = asyncio.Event(), asyncio.Event()

    async def waits(arguments: dict, call: ToolCall) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await call.report(1, message="stopping")
            stopped.set()
            raise
        return "never"

    async with connected({"wait": waits, "echo": _echo}) as (bridge, app):
        await bridge.call("c1", "wait")
        await asyncio.wait_for(started.wait(), WAIT)
        await bridge.ws.send('{"type":"cancel","id":"c1"}')
        await asyncio.wait_for(stopped.wait(), WAIT)
        await bridge.call("c2", "echo")
        assert await bridge.result("c2") == text_result("ok")  # neither a progress nor c1's result
        assert app.calls_cancelled == 1


async def test_reports_after_the_connection_ended_never_raise():
    """A task that goes on reporting after the bridge closed the connection: dropped, never an exception."""
    reporting: list[asyncio.Task] = []
    sent = 0

    async def report_forever(call: ToolCall) -> None:
        nonlocal sent
        while True:
            sent += 1
            await call.report(sent)
            await asyncio.sleep(0.005)

    async def starts(arguments: dict, call: ToolCall) -> str:
        reporting.append(asyncio.ensure_future(report_forever(call)))
        await asyncio.Event().wait()
        return "never"

    async with connected({"start": starts}) as (bridge, app):
        await bridge.call("c1", "start")
        assert json.loads(await bridge.next())["type"] == "progress"
        await bridge.ws.close(1011, "going away")
        await asyncio.wait_for(app.closed(), WAIT)
        after_close = sent
        while sent < after_close + 5:  # reports into the connection that is gone
            await asyncio.sleep(0.005)
        assert not reporting[0].done()  # still reporting: none of them raised
        reporting[0].cancel()


# -- handlers of one parameter and of two ----------------------------------------------------------


async def _one(arguments: dict) -> str:
    return "one"


async def _two(arguments: dict, call: ToolCall) -> str:
    return f"two: {call.name} {call.id}"


async def _many(*given: Any) -> str:
    return f"many: {len(given)}"


async def _defaulted(arguments: dict, call: ToolCall | None = None) -> str:
    return "defaulted: " + ("a call" if isinstance(call, ToolCall) else "none")


async def _prefixed(prefix: str, arguments: dict, call: ToolCall) -> str:
    return f"{prefix}: {call.name}"


class _Tools:
    async def __call__(self, arguments: dict) -> str:
        return "instance"

    async def method(self, arguments: dict, call: ToolCall) -> str:
        return f"method: {call.name}"


HANDLERS = {
    "one": (_one, False, "one"),
    "two": (_two, True, "two: two c-two"),
    "many": (_many, True, "many: 2"),
    "defaulted": (_defaulted, True, "defaulted: a call"),
    "prefixed": (functools.partial(_prefixed, "partial"), True, "partial: prefixed"),
    "instance": (_Tools(), False, "instance"),
    "method": (_Tools().method, True, "method: method"),
}


async def test_a_handler_is_given_the_call_when_it_takes_a_second_positional_parameter():
    """Decided at expose from the signature: one positional parameter, and it is called as before."""
    async with connected({name: handler for name, (handler, _, _) in HANDLERS.items()}) as (bridge, app):
        assert {name: tool.takes_call for name, tool in app.tools.items()} == {
            name: takes for name, (_, takes, _) in HANDLERS.items()
        }
        for name, (_, _, answer) in HANDLERS.items():
            await bridge.call(f"c-{name}", name)
            assert await bridge.result(f"c-{name}") == text_result(answer), name


async def test_the_calls_trace_context_reaches_the_handler():
    """`traceparent` and `tracestate` as the bridge sent them; None when it sent none."""

    async def context(arguments: dict, call: ToolCall) -> dict:
        return {"traceparent": call.traceparent, "tracestate": call.tracestate}

    async with connected({"context": context}) as (bridge, _):
        await bridge.call("c1", "context", traceparent=TRACEPARENT, tracestate=TRACESTATE)
        assert (await bridge.result("c1"))["structuredContent"] == {
            "traceparent": TRACEPARENT,
            "tracestate": TRACESTATE,
        }
        await bridge.call("c2", "context", traceparent=TRACEPARENT)
        assert (await bridge.result("c2"))["structuredContent"] == {
            "traceparent": TRACEPARENT,
            "tracestate": None,
        }
        await bridge.call("c3", "context")
        assert (await bridge.result("c3"))["structuredContent"] == {"traceparent": None, "tracestate": None}


# -- OpenTelemetry -------------------------------------------------------------------------------


@pytest.fixture
def spans(monkeypatch):
    """The spans ended during the test: an SDK TracerProvider as the global one, for this test only."""
    from mcp.shared import _otel as mcp_otel
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # What trace.set_tracer_provider sets, and allows only once a process.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    # The mcp SDK's tracer, a module's global, keeps the first provider it finds: a fresh one here
    # finds this test's, and the SDK's own goes back untouched for the tests that follow.
    monkeypatch.setattr(mcp_otel, "_tracer", trace.get_tracer("mcp-python-sdk"))
    yield exporter
    provider.shutdown()


def _current_span_context() -> Any:
    from opentelemetry import trace

    return trace.get_current_span().get_span_context()


ATTRIBUTES = {"gen_ai.operation.name": "execute_tool", "mcp.method.name": "tools/call"}


async def test_the_handler_runs_in_a_span_child_of_the_calls_trace(spans, monkeypatch):
    """`execute_tool NAME`, current in the handler, whose parent is the call's traceparent.

    The context is read as W3C Trace Context whatever the app's global propagator is: here
    one that reads nothing.
    """
    from opentelemetry import propagate
    from opentelemetry.propagators.composite import CompositePropagator
    from opentelemetry.trace import SpanKind, StatusCode

    monkeypatch.setattr(propagate, "_HTTP_TEXT_FORMAT", CompositePropagator([]))
    seen: list[Any] = []

    async def look(arguments: dict, call: ToolCall) -> str:
        seen.append(_current_span_context())
        return "looked"

    async with connected({"look": look}) as (bridge, _):
        await bridge.call("c1", "look", traceparent=TRACEPARENT, tracestate=TRACESTATE)
        assert await bridge.result("c1") == text_result("looked")
    (span,) = spans.get_finished_spans()
    assert span.name == "execute_tool look"
    assert span.kind is SpanKind.INTERNAL
    assert span.instrumentation_scope.name == "clientmcp_fast.client"
    assert dict(span.attributes) == {**ATTRIBUTES, "gen_ai.tool.name": "look"}
    assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert f"{span.parent.span_id:016x}" == PARENT_ID
    assert span.parent.is_remote
    assert span.context.trace_state.to_header() == TRACESTATE
    assert span.status.status_code is StatusCode.UNSET
    assert seen == [span.context]


async def test_a_call_without_trace_context_starts_a_trace_of_its_own(spans):
    """No traceparent: a root span, not a child of whatever span was current when the app connected."""
    from opentelemetry import trace

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("the app's startup"):
        async with connected({"echo": _echo}) as (bridge, _):
            await bridge.call("c1", "echo")
            assert await bridge.result("c1") == text_result("ok")
    handled = [span for span in spans.get_finished_spans() if span.name == "execute_tool echo"]
    assert len(handled) == 1
    assert handled[0].parent is None


async def test_a_tool_error_ends_the_span_in_error(spans):
    """A result with isError: status ERROR and error.type `tool_error` (MCP's semantic conventions)."""
    from opentelemetry.trace import StatusCode

    async def pay(arguments: dict) -> dict:
        return rejected("no_funds", "Not enough money.")

    async with connected({"pay": pay}) as (bridge, _):
        await bridge.call("c1", "pay", traceparent=TRACEPARENT)
        assert (await bridge.result("c1"))["isError"] is True
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes) == {**ATTRIBUTES, "gen_ai.tool.name": "pay", "error.type": "tool_error"}
    assert span.events == ()


class Refused(Exception):
    """An app's own exception, named by its module in error.type."""


@pytest.mark.parametrize(
    ("error", "type_name"),
    [(KeyError("milk"), "KeyError"), (Refused("not today"), f"{__name__}.Refused")],
    ids=["builtin", "the-apps-own"],
)
async def test_an_exception_is_recorded_on_the_span(spans, error, type_name):
    """The handler raised: the span records the exception and ends in error, as the agent's tool error says."""
    from opentelemetry.trace import StatusCode

    async def fails(arguments: dict) -> str:
        raise error

    async with connected({"fail": fails}) as (bridge, _):
        await bridge.call("c1", "fail", traceparent=TRACEPARENT)
        expected = f"{type(error).__name__}: {error}"
        assert await bridge.result("c1") == text_result(expected, is_error=True)
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == expected
    assert dict(span.attributes) == {**ATTRIBUTES, "gen_ai.tool.name": "fail", "error.type": type_name}
    assert [event.name for event in span.events] == ["exception"]
    assert span.events[0].attributes["exception.type"] == type_name
    assert span.events[0].attributes["exception.message"] == str(error)


async def test_a_cancelled_handlers_span_ends_without_error(spans):
    """A cancel is the agent's choice, not the tool's failure."""
    from opentelemetry.trace import StatusCode

    started = asyncio.Event()

    async def waits(arguments: dict) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    async with connected({"wait": waits}) as (bridge, _):
        await bridge.call("c1", "wait", traceparent=TRACEPARENT)
        await asyncio.wait_for(started.wait(), WAIT)
        await bridge.ws.send('{"type":"cancel","id":"c1"}')
        deadline = asyncio.get_running_loop().time() + WAIT
        while not spans.get_finished_spans():
            assert asyncio.get_running_loop().time() < deadline, "the span never ended"
            await asyncio.sleep(0.01)
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()


async def test_without_an_sdk_the_handler_still_runs_in_the_calls_trace(monkeypatch):
    """The API alone: no span is recorded, and the handler's current context is the agent's, to pass on."""
    from opentelemetry import trace

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # no provider set: the API's no-op
    seen: list[Any] = []

    async def look(arguments: dict) -> str:
        seen.append(_current_span_context())
        return "looked"

    async with connected({"look": look}) as (bridge, _):
        await bridge.call("c1", "look", traceparent=TRACEPARENT)
        assert await bridge.result("c1") == text_result("looked")
    (context,) = seen
    assert (f"{context.trace_id:032x}", f"{context.span_id:016x}") == (TRACE_ID, PARENT_ID)


async def test_without_opentelemetry_handlers_run_untraced_and_the_import_is_tried_once(monkeypatch):
    """An app whose process has no `opentelemetry`: calls are answered as ever, and it is looked for once."""
    tried: list[str] = []
    real_import = builtins.__import__

    def no_opentelemetry(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(client_module, "_tracing", None)  # as in a process that never answered a call
    monkeypatch.setattr(builtins, "__import__", no_opentelemetry)

    async def context(arguments: dict, call: ToolCall) -> str:
        return f"{call.traceparent}"

    async with connected({"context": context, "fail": _fails}) as (bridge, _):
        await bridge.call("c1", "context", traceparent=TRACEPARENT)
        assert await bridge.result("c1") == text_result(TRACEPARENT)
        await bridge.call("c2", "fail", traceparent=TRACEPARENT)
        assert await bridge.result("c2") == text_result("RuntimeError: broken", is_error=True)
    assert tried == ["opentelemetry"]
    assert client_module._tracing is False


async def _fails(arguments: dict) -> str:
    raise RuntimeError("broken")


def test_importing_the_library_imports_no_opentelemetry():
    """Not before a call: an app that never answers one, or runs without OpenTelemetry, pays nothing for it."""
    probe = "import sys, clientmcp_fast.client; print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=WAIT, check=True
    )
    assert done.stdout == "[]\n"


# -- against a real bridge, with the official `mcp` SDK as the agent -------------------------------

ERAS = ["legacy", MODERN]


async def _steps(arguments: dict, call: ToolCall) -> str:
    """Reports `steps` steps, `pause` seconds apart, then answers."""
    for step in range(1, arguments["steps"] + 1):
        await call.report(step, arguments["steps"], f"step {step}")
        await asyncio.sleep(arguments["pause"])
    return f"{arguments['steps']} steps"


@pytest.mark.parametrize("mode", ERAS)
async def test_the_agent_hears_the_handlers_reports_in_order(bridge, mode):
    """`call.report` reaches the SDK's progress_callback; reports further apart than the bridge's pace all do."""
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with online_app(bridge, "py", {"steps": _steps}), sdk_agent(bridge, "py", mode) as client:
        result = await client.call_tool("steps", {"steps": 4, "pause": 0.15}, progress_callback=progress)
        assert text_of(result) == "4 steps"
        sent = [(float(step), 4.0, f"step {step}") for step in range(1, 5)]
        await _until(lambda: heard[-1:] == sent[-1:])
        # Each at least 100 ms after the one before; a busy machine may still bring two closer.
        assert heard == [report for report in sent if report in heard]
        assert len(heard) >= 2
    await nothing_leaks(bridge)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_burst_of_reports_reaches_the_agent_as_its_latest(bridge, mode):
    """A handler reporting as fast as it can: the agent hears fewer, in order, and the last one before the result."""
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with online_app(bridge, "py", {"steps": _steps}), sdk_agent(bridge, "py", mode) as client:
        result = await client.call_tool("steps", {"steps": 50, "pause": 0}, progress_callback=progress)
        assert text_of(result) == "50 steps"
        await _until(lambda: heard[-1:] == [(50.0, 50.0, "step 50")])
        assert len(heard) < 50
        assert [step for step, _, _ in heard] == sorted({step for step, _, _ in heard})
        # Without a progressToken the reports go nowhere, and the call is answered as ever.
        assert text_of(await client.call_tool("steps", {"steps": 3, "pause": 0})) == "3 steps"
    await nothing_leaks(bridge)


@pytest.mark.parametrize("mode", ERAS)
async def test_the_agents_trace_context_reaches_the_handler_and_its_span(bridge, mode, spans):
    """The trace context of the agent's tools/call is the parent of the handler's span, through the bridge."""
    sent: list[dict] = []
    seen: list[tuple[str | None, str | None]] = []

    async def remember(request: Any) -> None:
        body = json.loads(request.content or b"{}")
        if body.get("method") == "tools/call":
            sent.append(body["params"].get("_meta", {}))

    async def look(arguments: dict, call: ToolCall) -> str:
        seen.append((call.traceparent, call.tracestate))
        return "looked"

    meta = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    async with (
        online_app(bridge, "py", {"look": look}),
        sdk_agent(bridge, "py", mode, event_hooks={"request": [remember]}) as client,
    ):
        assert text_of(await client.call_tool("look", {}, meta=meta)) == "looked"
    # The SDK puts its own span's context there when its tracer records: whichever was sent arrives.
    (sent_meta,) = sent
    assert seen == [(sent_meta["traceparent"], sent_meta.get("tracestate"))]
    _, trace_id, parent_id, _ = sent_meta["traceparent"].split("-")
    (span,) = [span for span in spans.get_finished_spans() if span.name == "execute_tool look"]
    assert (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}") == (trace_id, parent_id)
    await nothing_leaks(bridge)


def text_of(result: Any) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


async def _until(predicate: Any) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "never heard"
        await asyncio.sleep(0.01)
