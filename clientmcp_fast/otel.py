"""The bridge's own tracing: an OpenTelemetry span per tools/call, sent over OTLP/HTTP (docs/operations.md, Tracing).

Off unless OpenTelemetry's standard variables ask for traces (`chosen_exporters`), and then
only with the `otel` extra installed; without it, a warning and no tracing, never a failure to
start. The opentelemetry packages are imported only once tracing is on, so a bridge that does
not trace loads none of them. `OtelCallTracing` is the core's `CallTracing` port: the bridge
tells it of each call's start and end (core/bridge.py), and it gives the app its own span's
context. Its spans carry the attributes of the MCP semantic conventions that the official
`mcp` SDK's servers use, and never a call's arguments, its result or a token.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from clientmcp_fast.core.agent_context import Context
from clientmcp_fast.core.agent_eras import LEGACY, MODERN
from clientmcp_fast.core.http import MCP_PROTOCOL_VERSION
from clientmcp_fast.core.jsonrpc import NULL_ID
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.core.tracing import CallTracing
from clientmcp_fast.log import logger

if TYPE_CHECKING:
    from clientmcp_fast.core.calls import Call

# service.name when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one
SERVICE_NAME = "clientmcp"
# The exporters this bridge can make from the `otel` extra; OTEL_TRACES_EXPORTER's other
# values (zipkin, ...) need packages it does not carry.
EXPORTERS = ("otlp", "console")
# OTLP over HTTP with protobuf bodies is the one protocol the extra's exporter speaks.
OTLP_PROTOCOL = "http/protobuf"
DEFAULT_OTLP_ENDPOINT = "http://localhost:4318"  # the OTLP/HTTP default of the OpenTelemetry specification
TRACES_PATH = "v1/traces"
EXTRA_MISSING = (
    "tracing: OpenTelemetry is configured ({why}) but the `otel` extra is not installed "
    "({missing} cannot be imported): tracing is off; pip install 'clientmcp-fast[otel]'"
)

_LABELS = {outcome.value: outcome.label for outcome in Outcome}
_TEXTS = {outcome.value: outcome.text or None for outcome in Outcome}
_LEGACY_HEADERS = {version.encode(): version for version in LEGACY}
_NO_SPAN = object()  # call.span after `started` failed: `ended` leaves the call alone


def _set(environ: Mapping[str, str], name: str) -> str:
    """The value of the variable `name`, stripped; empty when unset (OpenTelemetry treats empty as unset)."""
    return (environ.get(name) or "").strip()


def chosen_exporters(environ: Mapping[str, str]) -> tuple[tuple[str, ...], list[str]]:
    """The trace exporters OpenTelemetry's variables ask for, and a warning for each value set that cannot be used.

    Tracing is on when OTEL_TRACES_EXPORTER names `otlp` or `console`, or, with it unset, when
    OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT says where OTLP goes.
    OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off whatever else is set. The
    SDK's own default, `otlp` to localhost, is not taken without one of these: a bridge traces
    only when asked to.
    """
    if _set(environ, "OTEL_SDK_DISABLED").lower() == "true":
        return (), []
    warnings = []
    named = _set(environ, "OTEL_TRACES_EXPORTER").lower()
    if named:
        names = [name.strip() for name in named.split(",") if name.strip()]
        if "none" in names:
            return (), []
        exporters = []
        for name in names:
            if name not in EXPORTERS:
                warnings.append(
                    f"tracing: OTEL_TRACES_EXPORTER names {name!r}, which this bridge cannot export to "
                    f"(only {' and '.join(EXPORTERS)}): it is ignored"
                )
            elif name not in exporters:
                exporters.append(name)
    elif _set(environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _set(environ, "OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporters = ["otlp"]
    else:
        return (), []
    if "otlp" in exporters:
        for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            protocol = _set(environ, variable)
            if protocol:
                if protocol != OTLP_PROTOCOL:
                    warnings.append(
                        f"tracing: {variable}={protocol}: this bridge exports OTLP over {OTLP_PROTOCOL} "
                        "only: no spans go to OTLP"
                    )
                    exporters.remove("otlp")
                break  # the traces' own variable wins over the general one
    return tuple(exporters), warnings


def otlp_traces_endpoint(environ: Mapping[str, str]) -> str:
    """Where OTLP/HTTP spans are posted, as the OpenTelemetry specification says to read it from the variables."""
    endpoint = _set(environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if endpoint:
        return endpoint  # used as it is, path and all
    base = _set(environ, "OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_OTLP_ENDPOINT
    return f"{base.removesuffix('/')}/{TRACES_PATH}"


def shown_endpoint(url: str) -> str:
    """`url` as the log shows it: without a user, password, query or fragment, which may hold credentials."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port is not None else host
    except ValueError:
        return "(an endpoint that is not a URL)"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _service_resource(environ: Mapping[str, str]):
    """The Resource of the bridge's spans: the SDK's (its variables), the service named clientmcp by default."""
    from opentelemetry.sdk.resources import Resource

    from clientmcp_fast import __version__

    resource = Resource.create()
    defaults: dict[str, str] = {"service.version": __version__}
    # The SDK names a service no variable named `unknown_service:<executable>`.
    if not _set(environ, "OTEL_SERVICE_NAME") and str(
        resource.attributes.get("service.name", "unknown_service")
    ).startswith("unknown_service"):
        defaults["service.name"] = SERVICE_NAME
    if "service.version" in resource.attributes:
        del defaults["service.version"]
    return resource.merge(Resource(defaults))


def call_tracing(environ: Mapping[str, str]) -> OtelCallTracing | None:
    """The bridge's tracer when OpenTelemetry's variables ask for traces and the `otel` extra is installed; else None.

    `environ` decides whether, where to, and the service's name; the SDK reads its other
    variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, the certificates,
    OTEL_BSP_*, OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES) from the process's environment.
    """
    exporters, warnings = chosen_exporters(environ)
    for warning in warnings:
        logger.warning("%s", warning)
    if not exporters:
        if warnings:
            logger.warning("tracing: no exporter left that this bridge can use: tracing is off")
        return None
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if "otlp" in exporters:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as error:
        why = (
            f"OTEL_TRACES_EXPORTER={environ['OTEL_TRACES_EXPORTER']}"
            if _set(environ, "OTEL_TRACES_EXPORTER")
            else "an OTLP endpoint is set"
        )
        logger.warning(EXTRA_MISSING.format(why=why, missing=error.name or "opentelemetry"))
        return None
    _log_through_the_bridge()
    # Shut down by the server (`shut_down`), within its own shutdown's bound, not at exit.
    provider = TracerProvider(resource=_service_resource(environ), shutdown_on_exit=False)
    where = []
    try:
        for name in exporters:
            if name == "otlp":
                endpoint = otlp_traces_endpoint(environ)
                provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
                where.append(f"OTLP/HTTP {shown_endpoint(endpoint)}")
            else:
                from opentelemetry.sdk.trace.export import ConsoleSpanExporter

                provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
                where.append("the console (stdout)")
    except Exception as error:
        # OpenTelemetry's variables are not the bridge's settings: as the SDK does, a bad one
        # costs the traces, never the service (a certificate file that is not there, say).
        provider.shutdown()
        logger.error(
            "tracing: the exporter cannot be made (%s: %s): tracing is off", type(error).__name__, error
        )
        return None
    service = provider.resource.attributes.get("service.name")
    logger.info("tracing on: a span per tools/call, service %s, to %s", service, " and ".join(where))
    return OtelCallTracing(provider.get_tracer("clientmcp_fast"), provider)


def _log_through_the_bridge() -> None:
    """The SDK's own warnings (an unreachable collector) as the bridge's log lines, not as Python's bare ones."""
    sdk_logger = logging.getLogger("opentelemetry")
    if not sdk_logger.handlers and logger.handlers:
        sdk_logger.handlers[:] = logger.handlers
        sdk_logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
        sdk_logger.propagate = False


def request_id(call: Call) -> str | None:
    """The JSON-RPC id of the agent's request as text (a string without its quotes); None for a forwarded call."""
    if not isinstance(call, Context):
        return None
    id_json = call.id_json
    if id_json == NULL_ID:  # not set: a call refused before `start_call` names its request
        return None
    if id_json.startswith(b'"'):
        return json.loads(id_json)
    return id_json.decode()


def protocol_version(call: Call) -> str | None:
    """The MCP revision of the call's request: 2026-07-28, the legacy one its MCP-Protocol-Version names, or None."""
    if call.modern:
        return MODERN
    if not isinstance(call, Context):
        return None
    header = call.exchange.request.header(MCP_PROTOCOL_VERSION)
    return _LEGACY_HEADERS.get(header.strip()) if header else None


def tool_name(call: Call) -> str | None:
    """The name of the tool called: a Tool's, or the name asked for when the call was refused before one was found."""
    tool = call.tool
    if tool is None or isinstance(tool, str):
        return tool
    return tool.name  # type: ignore[attr-defined]


class OtelCallTracing(CallTracing):
    """A server span per tools/call, parented on the agent's trace context, whose own context the app gets.

    Never raises into the bridge: a failure of the tracer or the SDK is logged once (with its
    traceback) and the call goes on without its span.
    """

    __slots__ = (
        "tracer",
        "provider",
        "_propagator",
        "_span_kind",
        "_error",
        "_in_context",
        "_root",
        "_failed",
    )

    def __init__(self, tracer: Any, provider: Any = None) -> None:
        from opentelemetry.context import Context as TraceContext
        from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.tracer = tracer
        self.provider = provider  # the SDK's TracerProvider that `shut_down` flushes; None in tests
        self._propagator = TraceContextTextMapPropagator()
        self._span_kind = SpanKind.SERVER
        self._error = StatusCode.ERROR
        self._in_context = set_span_in_context
        # An explicit empty context: a call without the agent's context is a root span, whatever
        # the thread's current context holds.
        self._root = TraceContext()
        self._failed = False

    def started(self, call: Call) -> None:
        try:
            span = self._open(call)
            call.span = span
            carrier: dict[str, str] = {}
            self._propagator.inject(carrier, self._in_context(span))
            traceparent = carrier.get("traceparent")
            call.traceparent = None if traceparent is None else traceparent.encode("ascii")
            call.tracestate = carrier.get("tracestate")
        except Exception:
            call.span = _NO_SPAN
            self._fail()

    def ended(self, call: Call, outcome: int) -> None:
        try:
            span = call.span
            if span is _NO_SPAN:
                return
            if span is None:  # refused before it reached an app: a span of no duration
                span = self._open(call)
            call.span = None
            label = _LABELS.get(int(outcome), str(outcome))
            span.set_attribute("clientmcp.outcome", label)
            if outcome != Outcome.RESULT:
                span.set_attribute("error.type", label)  # "tool_error" for a tool error, as the SDK's
                span.set_status(self._error, _TEXTS.get(int(outcome)))
            span.end()
        except Exception:
            self._fail()

    def _open(self, call: Call) -> Any:
        """Start the call's span, a child of the agent's context when the call carries one."""
        parent = self._root
        if call.traceparent is not None:
            carrier = {"traceparent": call.traceparent.decode("ascii")}
            if call.tracestate is not None:
                carrier["tracestate"] = call.tracestate
            parent = self._propagator.extract(carrier, self._root)
        name = tool_name(call)
        attributes: dict[str, str] = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
        }
        if name is not None:
            attributes["gen_ai.tool.name"] = name
        version = protocol_version(call)
        if version is not None:
            attributes["mcp.protocol.version"] = version
        rpc_id = request_id(call)
        if rpc_id is not None:
            attributes["jsonrpc.request.id"] = rpc_id
        span_name = f"tools/call {name}" if name is not None else "tools/call"
        return self.tracer.start_span(span_name, parent, self._span_kind, attributes)

    def _fail(self) -> None:
        """Log the first failure with its traceback; later ones would say the same."""
        if not self._failed:
            self._failed = True
            logger.exception("tracing failed; calls go on, some without their span (logged once)")

    def shut_down(self) -> threading.Thread | None:
        """Export the spans not yet exported and stop, in a thread of its own that the caller may stop waiting for."""
        provider = self.provider
        if provider is None:
            return None
        thread = threading.Thread(target=provider.shutdown, name="clientmcp-tracing-shutdown", daemon=True)
        thread.start()
        return thread
