"""The bridge's own tracing (clientmcp_fast/otel.py; docs/operations.md, Tracing): when it is on, and its spans.

`OtelCallTracing` is driven as the bridge drives it, `started` then `ended` (or `ended` alone
for a refused call), its spans kept by the SDK's in-memory exporter. Whether tracing is on is
decided from a dict of variables, never the test process's environment.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from clientmcp_fast import otel
from clientmcp_fast.core.agent_context import Context
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.register import Tool
from clientmcp_fast.core.tokens import Grant
from clientmcp_fast.core.tracing import valid_traceparent
from clientmcp_fast.otel import (
    OtelCallTracing,
    call_tracing,
    chosen_exporters,
    otlp_traces_endpoint,
    shown_endpoint,
)
from tests.core.fakes import (
    NOW,
    RecordingExchange,
    RecordingWaiter,
    connect,
    make_bridge,
    register,
    request_with_headers,
    tool,
)

AGENT_TRACE = "0af7651916cd23a7a0a8b0a5a0a8b0a5"
AGENT_SPAN = "b7ad6b7169203331"
AGENT_TRACEPARENT = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01".encode()  # a call holds its bytes


@pytest.fixture
def spans():
    """A tracer whose ended spans are kept in memory: (tracing, exporter)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield OtelCallTracing(provider.get_tracer("tests"), provider), exporter
    provider.shutdown()


def a_tool(name: str = "add_todo") -> Tool:
    return Tool(name, (), name.encode())


def agent_call(
    traceparent: bytes | None = AGENT_TRACEPARENT,
    tracestate: str | None = None,
    *,
    modern: bool = False,
    id_json: bytes = b"7",
    version: bytes | None = b"2025-11-25",
    tool: object = None,
) -> Context:
    """A tools/call posted by an agent, as `start_call` leaves it just before the bridge tells the tracer."""
    headers = {b"mcp-protocol-version": version} if version is not None else {}
    request = request_with_headers(b"POST", b"/mcp", headers)
    call = Context.__new__(Context)
    call.init_context(
        RecordingExchange(request), Grant("app-1", "agent", float("inf"), float("-inf")), (), True, False
    )
    call.id_json = id_json
    call.modern = modern
    call.tool = a_tool() if tool is None else tool
    call.traceparent = traceparent
    call.tracestate = tracestate
    return call


def only_span(exporter: InMemorySpanExporter):
    (span,) = exporter.get_finished_spans()
    return span


class TestSpanOfACall:
    def test_a_server_span_named_for_the_tool_child_of_the_agents_context(self, spans):
        tracing, exporter = spans
        call = agent_call()
        tracing.started(call)
        assert exporter.get_finished_spans() == ()  # open until the call ends
        tracing.ended(call, Outcome.RESULT)
        span = only_span(exporter)
        assert span.name == "tools/call add_todo"
        assert span.kind is SpanKind.SERVER
        assert f"{span.context.trace_id:032x}" == AGENT_TRACE
        assert f"{span.parent.span_id:016x}" == AGENT_SPAN
        assert span.parent.is_remote
        assert span.status.status_code is StatusCode.UNSET
        assert span.end_time >= span.start_time

    def test_the_app_gets_the_bridges_span_as_its_parent(self, spans):
        tracing, exporter = spans
        call = agent_call(tracestate="vendor=value,other=1")
        tracing.started(call)
        assert valid_traceparent(call.traceparent) == call.traceparent
        version, trace_id, span_id, flags = call.traceparent.decode().split("-")
        assert (version, trace_id, flags) == ("00", AGENT_TRACE, "01")
        assert span_id != AGENT_SPAN
        assert call.tracestate == "vendor=value,other=1"  # carried through, as W3C asks of a participant
        tracing.ended(call, Outcome.RESULT)
        assert f"{only_span(exporter).context.span_id:016x}" == span_id

    def test_attributes_in_the_mcp_semantic_conventions_and_no_more(self, spans):
        tracing, exporter = spans
        call = agent_call(id_json=b'"req-1"')
        tracing.started(call)
        tracing.ended(call, Outcome.RESULT)
        assert dict(only_span(exporter).attributes) == {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "add_todo",
            "mcp.protocol.version": "2025-11-25",
            "jsonrpc.request.id": "req-1",  # a string id without its JSON quotes, as the SDK's str()
            "clientmcp.outcome": "result",
        }

    def test_a_numeric_request_id_is_its_digits(self, spans):
        tracing, exporter = spans
        call = agent_call(id_json=b"42")
        tracing.started(call)
        tracing.ended(call, Outcome.RESULT)
        assert only_span(exporter).attributes["jsonrpc.request.id"] == "42"

    def test_a_modern_call_names_2026_07_28(self, spans):
        tracing, exporter = spans
        call = agent_call(modern=True, version=b"2026-07-28")
        tracing.started(call)
        tracing.ended(call, Outcome.RESULT)
        assert only_span(exporter).attributes["mcp.protocol.version"] == "2026-07-28"

    @pytest.mark.parametrize("version", [None, b"1999-01-01"], ids=["no header", "unknown header"])
    def test_a_legacy_call_without_a_known_revision_has_no_version(self, spans, version):
        tracing, exporter = spans
        call = agent_call(version=version)
        tracing.started(call)
        tracing.ended(call, Outcome.RESULT)
        assert "mcp.protocol.version" not in only_span(exporter).attributes

    def test_a_call_without_the_agents_context_is_a_root_span(self, spans):
        tracing, exporter = spans
        call = agent_call(traceparent=None)
        tracing.started(call)
        assert valid_traceparent(call.traceparent) == call.traceparent  # the app still gets a trace
        assert call.tracestate is None
        tracing.ended(call, Outcome.RESULT)
        span = only_span(exporter)
        assert span.parent is None
        assert call.traceparent is not None and f"{span.context.trace_id:032x}".encode() in call.traceparent

    def test_a_call_no_agent_posted_here_has_no_request_id(self, spans):
        tracing, exporter = spans
        call = RecordingWaiter()  # as a call forwarded from another instance
        call.tool = a_tool("lookup")
        call.traceparent = AGENT_TRACEPARENT
        tracing.started(call)
        tracing.ended(call, Outcome.RESULT)
        span = only_span(exporter)
        assert span.name == "tools/call lookup"
        assert "jsonrpc.request.id" not in span.attributes
        assert "mcp.protocol.version" not in span.attributes
        assert f"{span.parent.span_id:016x}" == AGENT_SPAN


class TestOutcomes:
    def test_a_tool_error_is_an_error_of_type_tool_error(self, spans):
        tracing, exporter = spans
        call = agent_call()
        tracing.started(call)
        tracing.ended(call, Outcome.TOOL_ERROR)
        span = only_span(exporter)
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "tool_error"
        assert span.attributes["clientmcp.outcome"] == "tool_error"

    @pytest.mark.parametrize("outcome", [o for o in Outcome if o not in (Outcome.RESULT, Outcome.TOOL_ERROR)])
    def test_every_other_outcome_but_a_result_is_an_error_named_for_it(self, spans, outcome):
        tracing, exporter = spans
        call = agent_call()
        tracing.started(call)
        tracing.ended(call, outcome)
        span = only_span(exporter)
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == outcome.name.lower()
        assert span.attributes["clientmcp.outcome"] == outcome.name.lower()
        # The fixed text of the outcome, which names nothing of the call, or none.
        assert span.status.description == (outcome.text or None)

    def test_the_outcome_may_come_as_a_plain_integer(self, spans):
        tracing, exporter = spans
        call = agent_call()
        tracing.started(call)
        tracing.ended(call, int(Outcome.TIMEOUT))
        assert only_span(exporter).attributes["clientmcp.outcome"] == "timeout"

    def test_a_refused_call_has_a_span_of_no_duration(self, spans):
        tracing, exporter = spans
        call = agent_call(tool="no_such_tool")  # refused before a Tool was found: the name asked for
        tracing.ended(call, Outcome.UNKNOWN_TOOL)
        span = only_span(exporter)
        assert span.name == "tools/call no_such_tool"
        assert span.attributes["gen_ai.tool.name"] == "no_such_tool"
        assert span.attributes["error.type"] == "unknown_tool"
        assert span.status.status_code is StatusCode.ERROR
        assert f"{span.parent.span_id:016x}" == AGENT_SPAN
        assert call.traceparent == AGENT_TRACEPARENT  # nothing to hand on: no app gets it
        assert "jsonrpc.request.id" in span.attributes

    def test_a_call_refused_before_its_request_id_was_set_has_none(self, spans):
        tracing, exporter = spans
        call = agent_call(id_json=b"null", tool="add_todo")
        tracing.ended(call, Outcome.OFFLINE)
        assert "jsonrpc.request.id" not in only_span(exporter).attributes

    def test_a_span_ends_once(self, spans):
        tracing, exporter = spans
        call = agent_call()
        tracing.started(call)
        tracing.ended(call, Outcome.RESULT)
        assert call.span is None
        assert len(exporter.get_finished_spans()) == 1


class TestNeverRaises:
    def test_a_failing_tracer_is_logged_once_and_the_calls_go_on(self, caplog):
        class Broken:
            def start_span(self, *args, **kwargs):
                raise RuntimeError("tracer bug")

        tracing = OtelCallTracing(Broken())
        with caplog.at_level(logging.ERROR, logger="clientmcp"):
            for _ in range(3):
                call = agent_call()
                tracing.started(call)
                assert call.traceparent == AGENT_TRACEPARENT  # the agent's, untouched
                tracing.ended(call, Outcome.RESULT)
                tracing.ended(agent_call(), Outcome.OFFLINE)
        failures = [record for record in caplog.records if "tracing failed" in record.getMessage()]
        assert len(failures) == 1
        assert failures[0].exc_info is not None and "tracer bug" in str(failures[0].exc_info[1])

    def test_a_span_that_fails_to_end_is_logged_not_raised(self, spans, caplog):
        tracing, exporter = spans
        call = agent_call()
        tracing.started(call)

        class Unending:
            def set_attribute(self, *args):
                raise ValueError("span bug")

        call.span = Unending()
        with caplog.at_level(logging.ERROR, logger="clientmcp"):
            tracing.ended(call, Outcome.RESULT)
        assert any("tracing failed" in record.getMessage() for record in caplog.records)


class TestThroughTheBridge:
    """The core's Bridge drives the tracer: what the app gets, and how each span ends."""

    def test_the_app_gets_the_span_that_ends_with_the_call(self, spans):
        tracing, exporter = spans
        bridge = make_bridge(call_timeout=5.0)
        bridge.tracing = tracing
        channel, link = connect(bridge)
        register(channel, tool("work"), trace=True)
        call = RecordingWaiter()
        call.traceparent = AGENT_TRACEPARENT
        call.tool = channel.toolset.tools["work"]
        bridge.start_call(channel, call.tool, b"{}", call, NOW)
        sent = link.messages()[-1]
        bridge.on_timer(NOW + 5.0)  # no answer within the call timeout
        span = only_span(exporter)
        assert sent["traceparent"] == f"00-{AGENT_TRACE}-{span.context.span_id:016x}-01"
        assert f"{span.parent.span_id:016x}" == AGENT_SPAN
        assert span.attributes["clientmcp.outcome"] == "timeout"
        assert span.status.status_code is StatusCode.ERROR

    def test_a_call_too_large_for_its_app_ends_its_span(self, spans):
        tracing, exporter = spans
        bridge = make_bridge()
        bridge.tracing = tracing
        channel, _ = connect(bridge)
        register(channel, tool("work"), trace=True)
        call = RecordingWaiter()
        call.tool = channel.toolset.tools["work"]
        arguments = b'{"a":"' + b"x" * (4 * 1024 * 1024) + b'"}'
        assert bridge.start_call(channel, call.tool, arguments, call, NOW) is False
        assert only_span(exporter).attributes["error.type"] == "too_large"


# -- whether tracing is on ------------------------------------------------------------------


class TestWhenTracingIsOn:
    @pytest.mark.parametrize(
        "environ",
        [
            {},
            {"OTEL_SERVICE_NAME": "bridge"},
            {"OTEL_EXPORTER_OTLP_HEADERS": "a=b"},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": ""},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
            {"OTEL_TRACES_EXPORTER": "none"},
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
            {"OTEL_TRACES_EXPORTER": "otlp,none"},
            {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
            {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
            # Metrics or logs only: not traces.
            {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4318/v1/metrics"},
            {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://collector:4318/v1/logs"},
        ],
    )
    def test_off(self, environ):
        assert chosen_exporters(environ) == ((), [])
        assert call_tracing(environ) is None

    @pytest.mark.parametrize(
        "environ, exporters",
        [
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
            ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ("otlp",)),
            ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
            ({"OTEL_TRACES_EXPORTER": " OTLP "}, ("otlp",)),
            ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
            ({"OTEL_TRACES_EXPORTER": "otlp,console,otlp"}, ("otlp", "console")),
            ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ("otlp",)),
            (
                {
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                },
                ("otlp",),
            ),
        ],
    )
    def test_on(self, environ, exporters):
        assert chosen_exporters(environ) == (exporters, [])

    def test_an_exporter_this_bridge_lacks_is_named_and_ignored(self):
        exporters, warnings = chosen_exporters({"OTEL_TRACES_EXPORTER": "zipkin,otlp"})
        assert exporters == ("otlp",)
        assert warnings == [
            "tracing: OTEL_TRACES_EXPORTER names 'zipkin', which this bridge cannot export to "
            "(only otlp and console): it is ignored"
        ]

    @pytest.mark.parametrize(
        "environ, variable",
        [
            ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
            ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            (
                {
                    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                },
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            ),
        ],
    )
    def test_an_otlp_protocol_other_than_http_protobuf_turns_otlp_off(self, environ, variable):
        exporters, warnings = chosen_exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", **environ})
        assert exporters == ()
        assert len(warnings) == 1 and warnings[0].startswith(f"tracing: {variable}=")
        assert "http/protobuf only" in warnings[0]

    def test_the_traces_own_protocol_wins(self):
        environ = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",  # for the other signals
        }
        assert chosen_exporters(environ) == (("otlp",), [])

    def test_nothing_usable_left_says_tracing_is_off(self, caplog):
        with caplog.at_level(logging.WARNING, logger="clientmcp"):
            assert call_tracing({"OTEL_TRACES_EXPORTER": "jaeger"}) is None
        assert [r.getMessage() for r in caplog.records][-1] == (
            "tracing: no exporter left that this bridge can use: tracing is off"
        )

    @pytest.mark.parametrize(
        "environ, endpoint",
        [
            ({}, "http://localhost:4318/v1/traces"),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"),
            ({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c.example/otlp/"}, "https://c.example/otlp/v1/traces"),
            (
                {
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/custom",
                },
                "http://traces:9999/custom",
            ),
        ],
    )
    def test_the_endpoint_as_the_specification_reads_it(self, environ, endpoint):
        assert otlp_traces_endpoint(environ) == endpoint

    @pytest.mark.parametrize(
        "url, shown",
        [
            ("http://collector:4318/v1/traces", "http://collector:4318/v1/traces"),
            ("https://user:secret@c.example/v1/traces?key=secret#x", "https://c.example/v1/traces"),
            ("http://[::1]:4318/v1/traces", "http://[::1]:4318/v1/traces"),
            ("http://c:notaport/v1/traces", "(an endpoint that is not a URL)"),
        ],
    )
    def test_the_log_never_shows_credentials_of_the_endpoint(self, url, shown):
        assert shown_endpoint(url) == shown


class TestTurningOn:
    def test_on_it_says_so_and_where_to(self, monkeypatch, caplog):
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
        environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:pw@collector:4318"}
        with caplog.at_level(logging.INFO, logger="clientmcp"):
            tracing = call_tracing(environ)
        try:
            assert isinstance(tracing, OtelCallTracing)
            assert tracing.provider.resource.attributes["service.name"] == "clientmcp"
            assert [r.getMessage() for r in caplog.records] == [
                "tracing on: a span per tools/call, service clientmcp, to OTLP/HTTP http://collector:4318/v1/traces"
            ]
            (processor,) = tracing.provider._active_span_processor._span_processors
            assert processor.span_exporter._endpoint == "http://user:pw@collector:4318/v1/traces"
        finally:
            thread = tracing.shut_down()
            thread.join(10)
            assert not thread.is_alive()

    def test_the_service_is_named_by_its_variables(self, monkeypatch):
        monkeypatch.setenv("OTEL_SERVICE_NAME", "edge-bridge")
        tracing = call_tracing({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "edge-bridge"})
        try:
            assert tracing.provider.resource.attributes["service.name"] == "edge-bridge"
        finally:
            tracing.shut_down().join(10)

    def test_the_resource_attributes_may_name_the_service(self, monkeypatch):
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        monkeypatch.setenv(
            "OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,deployment.environment=test"
        )
        tracing = call_tracing({"OTEL_TRACES_EXPORTER": "console"})
        try:
            attributes = tracing.provider.resource.attributes
            assert attributes["service.name"] == "from-attributes"
            assert attributes["deployment.environment"] == "test"
        finally:
            tracing.shut_down().join(10)

    def test_configured_without_the_extra_warns_and_traces_nothing(self, monkeypatch, caplog):
        # An import of the SDK fails as it does where the extra is not installed.
        monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
        with caplog.at_level(logging.WARNING, logger="clientmcp"):
            assert call_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) is None
        assert [r.getMessage() for r in caplog.records] == [
            "tracing: OpenTelemetry is configured (an OTLP endpoint is set) but the `otel` extra is not "
            "installed (opentelemetry.sdk.trace cannot be imported): tracing is off; "
            "pip install 'clientmcp-fast[otel]'"
        ]

    def test_an_exporter_that_cannot_be_made_costs_the_traces_not_the_bridge(self, monkeypatch, caplog):
        from opentelemetry.exporter.otlp.proto.http import trace_exporter

        def broken(**kwargs):
            raise FileNotFoundError("no such certificate: /etc/ca.pem")

        monkeypatch.setattr(trace_exporter, "OTLPSpanExporter", broken)
        with caplog.at_level(logging.WARNING, logger="clientmcp"):
            assert call_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318"}) is None
        assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
            (
                logging.ERROR,
                "tracing: the exporter cannot be made (FileNotFoundError: no such certificate: /etc/ca.pem): "
                "tracing is off",
            )
        ]

    def test_the_exporter_missing_alone_is_the_extra_missing_too(self, monkeypatch, caplog):
        monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
        with caplog.at_level(logging.WARNING, logger="clientmcp"):
            assert call_tracing({"OTEL_TRACES_EXPORTER": "otlp"}) is None
        (record,) = caplog.records
        assert record.levelno == logging.WARNING
        assert "(OTEL_TRACES_EXPORTER=otlp)" in record.getMessage()
        assert (
            "opentelemetry.exporter.otlp.proto.http.trace_exporter cannot be imported" in record.getMessage()
        )


# -- nothing of OpenTelemetry without it ----------------------------------------------------

_IMPORTS_OF_A_BRIDGE = textwrap.dedent(
    """
    import asyncio, os, sys
    from clientmcp_fast.config import Settings
    from clientmcp_fast.net.server import Server, new_event_loop

    async def main():
        settings = Settings(secrets=(b"x" * 32,), signing_secret=b"x" * 32, host="127.0.0.1", port=0)
        server = Server(settings)
        await server.start()
        await server.shutdown()
        print(server.tracing is not None)

    new_event_loop().run_until_complete(main())
    loaded = {"clientmcp_fast.otel"} & set(sys.modules)
    loaded |= {name.partition(".")[0] for name in sys.modules if name.partition(".")[0] == "opentelemetry"}
    print(sorted(loaded))
    """
)


def bridge_imports(**environ: str) -> list[str]:
    """Whether a bridge run in a process of its own with only `environ` of OTEL_ variables traced; what it imported."""
    import os

    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update(environ)
    result = subprocess.run(
        [sys.executable, "-c", _IMPORTS_OF_A_BRIDGE], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_bridge_without_otel_variables_imports_nothing_of_opentelemetry():
    assert bridge_imports() == ["False", "[]"]


def test_a_bridge_with_otel_variables_that_ask_for_no_traces_imports_no_sdk():
    assert bridge_imports(OTEL_SERVICE_NAME="bridge", OTEL_TRACES_EXPORTER="none") == [
        "False",
        "['clientmcp_fast.otel']",
    ]


def test_a_bridge_asked_for_traces_imports_the_sdk():
    assert bridge_imports(OTEL_TRACES_EXPORTER="console") == [
        "True",
        "['clientmcp_fast.otel', 'opentelemetry']",
    ]


def test_otel_is_reached_only_by_the_servers_tracer_choice():
    # clientmcp_fast.otel is imported in one place, lazily; of what the server imports, only it
    # imports opentelemetry (the app library, clientmcp_fast.client, has its own, for apps).
    from test_imports import MODULES, reached

    importers = sorted(name for name, imports in MODULES.items() if "clientmcp_fast.otel" in imports)
    assert importers == ["clientmcp_fast.net.server"]
    server = {"clientmcp_fast.net.server", *reached("clientmcp_fast.net.server")}
    users = sorted(
        name
        for name in server
        if any(i == "opentelemetry" or i.startswith("opentelemetry.") for i in MODULES[name])
    )
    assert users == ["clientmcp_fast.otel"]
    assert otel.__name__ in server


# -- the tests' OTLP receiver ----------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_the_receiver_decodes_what_the_sdk_exports(compression):
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from otlp_receiver import otlp_receiver

    with otlp_receiver() as receiver:
        exporter = OTLPSpanExporter(
            endpoint=f"{receiver.endpoint}/v1/traces", compression=Compression(compression), timeout=5
        )
        provider = TracerProvider(
            resource=Resource({"service.name": "receiver-test"}), shutdown_on_exit=False
        )
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("tests")
        parent = tracer.start_span("parent", kind=SpanKind.CLIENT, attributes={"n": 3, "flag": True})
        child = tracer.start_span("child", context=otel_context_of(parent), attributes={"list": ["a", "b"]})
        child.set_status(StatusCode.ERROR)
        child.end()
        parent.end()
        provider.shutdown()
        spans = receiver.wait_for(lambda spans: len(spans) == 2)
    by_name = {span.name: span for span in spans}
    parent_got, child_got = by_name["parent"], by_name["child"]
    assert parent_got.trace_id == f"{parent.get_span_context().trace_id:032x}"
    assert parent_got.span_id == f"{parent.get_span_context().span_id:016x}"
    assert parent_got.parent_span_id == ""
    assert (parent_got.kind, parent_got.service, parent_got.attributes) == (
        3,
        "receiver-test",
        {"n": 3, "flag": True},
    )
    assert child_got.trace_id == parent_got.trace_id
    assert child_got.parent_span_id == parent_got.span_id
    assert (child_got.status_code, child_got.attributes) == (2, {"list": ["a", "b"]})
    assert receiver.errors == []


def otel_context_of(span):
    from opentelemetry.trace import set_span_in_context

    return set_span_in_context(span)
