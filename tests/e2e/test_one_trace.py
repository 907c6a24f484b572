"""One trace, three processes: an SDK agent, the bridge, a Python app, each exporting its spans over OTLP/HTTP.

The agent is the official `mcp` SDK's `Client` with OpenTelemetry's SDK (its span `MCP send
tools/call <tool>` puts its context in `_meta.traceparent`); the bridge is `clientmcp serve`
with the `otel` extra, configured by OTEL_ variables only (docs/operations.md, Tracing); the
app is `clientmcp_fast.client` with OpenTelemetry's SDK (its span `execute_tool <tool>`
around the handler, docs/apps.md, Progress and trace context). Each is a process of its own
and exports to the test's receiver (tests/otlp_receiver.py): the spans must form one trace,
the bridge's the child of the agent's, the app's the child of the bridge's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from test_cli import SECRET_TEXT, Served, environment, free_port, minted, run

WAIT = 20.0
ERAS = ["legacy", "2026-07-28"]

# What the agent's and the app's processes start with: OpenTelemetry's SDK as the global
# tracer provider, exporting each span as it ends to the endpoint of OTEL_EXPORTER_OTLP_ENDPOINT.
_OTEL_SETUP = """
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create())
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
"""

APP = _OTEL_SETUP + textwrap.dedent(
    """
    import asyncio, os, sys
    from clientmcp_fast.client import ClientMCP

    async def main():
        answered = asyncio.Event()

        async def lookup(arguments, call):
            answered.set()
            return f"found {arguments['q']}"

        app = ClientMCP(os.environ["BRIDGE_WS"], os.environ["APP_TOKEN"])
        app.expose("lookup", lookup, input_schema={"type": "object"})
        async with app:
            print("registered", flush=True)
            await answered.wait()
            await asyncio.sleep(0.2)  # the result on its way before the connection closes

    asyncio.run(main())
    provider.shutdown()
    """
)

AGENT = _OTEL_SETUP + textwrap.dedent(
    """
    import asyncio, os
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        headers = {"Authorization": f"Bearer {os.environ['AGENT_TOKEN']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30.0) as http,
            Client(
                streamable_http_client(os.environ["BRIDGE_MCP"], http_client=http), mode=os.environ["MODE"]
            ) as client,
        ):
            result = await client.call_tool("lookup", {"q": "otters"})
            print(result.content[0].text, flush=True)

    asyncio.run(main())
    provider.shutdown()
    """
)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


def clean_environment(**values: str) -> dict[str, str]:
    """The test process's environment without its CLIENTMCP_ and OTEL_ variables, plus `values`."""
    env = {name: value for name, value in environment().items() if not name.startswith("OTEL_")}
    env.update(values)
    return env


def only(spans: list[ReceivedSpan], service: str, name: str) -> ReceivedSpan:
    (span,) = [span for span in spans if span.service == service and span.name == name]
    return span


@pytest.mark.parametrize("mode", ERAS)
def test_agent_bridge_and_app_spans_form_one_trace(receiver, mode):
    port = free_port()
    bridge = Served(
        ["serve", "--host", "127.0.0.1", "--port", str(port)],
        clean_environment(
            CLIENTMCP_SECRET=SECRET_TEXT,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_BSP_SCHEDULE_DELAY="50",
        ),
        port,
    )
    app = None
    try:
        bridge.wait_listening()
        app = subprocess.Popen(
            [sys.executable, "-c", APP],
            env=clean_environment(
                BRIDGE_WS=f"ws://127.0.0.1:{port}/connect",
                APP_TOKEN=minted(run("token", "client", "otters")),
                OTEL_SERVICE_NAME="app",
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert app.stdout.readline() == "registered\n", app.stderr.read()
        agent = subprocess.run(
            [sys.executable, "-c", AGENT],
            env=clean_environment(
                BRIDGE_MCP=f"http://127.0.0.1:{port}/mcp",
                AGENT_TOKEN=minted(run("token", "agent", "otters")),
                MODE=mode,
                OTEL_SERVICE_NAME="agent",
                OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (agent.returncode, agent.stdout) == (0, "found otters\n"), agent.stderr
        assert app.wait(WAIT) == 0, app.stderr.read()
        spans = receiver.wait_for(
            lambda spans: {span.service for span in spans} >= {"agent", "clientmcp", "app"}, WAIT
        )
    finally:
        if app is not None and app.poll() is None:
            app.kill()
            app.wait(10)
        code, _ = bridge.stop()
        bridge.kill()
    assert code == 0

    agents = only(spans, "agent", "MCP send tools/call lookup")
    bridges = only(spans, "clientmcp", "tools/call lookup")
    apps = only(spans, "app", "execute_tool lookup")
    assert agents.trace_id == bridges.trace_id == apps.trace_id
    assert (agents.kind, bridges.kind) == (3, 2)  # CLIENT, SERVER
    assert bridges.parent_span_id == agents.span_id
    assert apps.parent_span_id == bridges.span_id
    assert bridges.attributes["mcp.protocol.version"] == (
        "2026-07-28" if mode == "2026-07-28" else "2025-11-25"
    )
    assert bridges.attributes["clientmcp.outcome"] == "result"
    assert receiver.errors == []
