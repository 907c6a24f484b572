"""`clientmcp serve` tracing its calls (docs/operations.md, Tracing): its spans reach a collector over OTLP/HTTP.

The bridge runs as an operator runs it, configured by OpenTelemetry's variables only, and
exports to the test's OTLP receiver (tests/otlp_receiver.py). The app is a raw `websockets`
client that registered `trace: true` and keeps the `traceparent` of each call it gets; the
agent posts a tools/call carrying its own trace context. One trace must result: the bridge's
span the child of the agent's, and the app handed the bridge's span as its parent.
"""

from __future__ import annotations

import json
import signal
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import OtlpReceiver, otlp_receiver
from test_cli import SECRET_TEXT, Served, environment, free_port, minted, run
from websockets.sync.client import connect

WAIT = 10.0
AGENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"
AGENT_TRACEPARENT = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"
SPAN_NAME = "tools/call echo"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


class TracedApp:
    """A raw app with one tool, `echo`, registered with `trace: true`: answers every call, keeps each `call` message."""

    def __init__(self, ws_url: str, token: str) -> None:
        self.calls: list[dict[str, Any]] = []
        self.registered = threading.Event()
        self._token = token
        self._url = ws_url
        self._thread = threading.Thread(target=self._serve, name="traced-app", daemon=True)
        self.error: BaseException | None = None

    def _serve(self) -> None:
        try:
            with connect(self._url, subprotocols=["clientmcp.v1", self._token], open_timeout=WAIT) as ws:
                tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
                ws.send(json.dumps({"type": "register", "tools": tools, "trace": True}))
                assert json.loads(ws.recv(timeout=WAIT)) == {"type": "registered"}
                self.registered.set()
                for text in ws:
                    message = json.loads(text)
                    if message.get("type") != "call":
                        continue
                    self.calls.append(message)
                    content = [{"type": "text", "text": json.dumps(message.get("arguments"))}]
                    ws.send(
                        json.dumps({"type": "result", "id": message["id"], "result": {"content": content}})
                    )
        except BaseException as error:  # reported by the test
            self.error = error
            self.registered.set()

    def start(self) -> TracedApp:
        self._thread.start()
        assert self.registered.wait(WAIT), "the app did not register"
        assert self.error is None, self.error
        return self


def served_app(served: Served, client_id: str = "traced-app") -> TracedApp:
    """A TracedApp of `client_id` on the `clientmcp serve` process, its token minted by `clientmcp token`."""
    return TracedApp(
        f"ws://127.0.0.1:{served.port}/connect", minted(run("token", "client", client_id))
    ).start()


def agent_token(client_id: str = "traced-app") -> str:
    return minted(run("token", "agent", client_id))


def post_call(port: int, token: str, headers: dict[str, str] | None = None, meta: dict | None = None) -> dict:
    """A legacy tools/call of `echo` (no revision named), its JSON answer."""
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
    if meta is not None:
        params["_meta"] = meta
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        },
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        assert response.status == 200
        return json.loads(response.read())


@pytest.fixture
def traced_bridge(receiver: OtlpReceiver) -> Iterator[Callable[..., Served]]:
    """A factory for `clientmcp serve` processes exporting to the receiver, with OTEL_ variables `env` besides."""
    started: list[Served] = []

    def start(**env: str) -> Served:
        port = free_port()
        variables = {name: value for name, value in environment().items() if not name.startswith("OTEL_")}
        variables.update(
            {
                "CLIENTMCP_SECRET": SECRET_TEXT,
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "50",
                **env,
            }
        )
        served = Served(["serve", "--host", "127.0.0.1", "--port", str(port)], variables, port)
        started.append(served)
        served.wait_listening()
        return served

    yield start
    for served in started:
        served.kill()


def stopped_log(served: Any) -> str:
    """SIGTERM: exit 0, and everything the bridge logged."""
    code, _ = served.stop(signal.SIGTERM)
    assert code == 0
    return served.process.stderr.read()


@pytest.mark.parametrize("carried_in", ["traceparent header", "_meta.traceparent"])
def test_one_trace_from_the_agent_through_the_bridge_to_the_app(traced_bridge, receiver, carried_in):
    served = traced_bridge()
    app = served_app(served)
    if carried_in == "traceparent header":
        answer = post_call(served.port, agent_token(), headers={"traceparent": AGENT_TRACEPARENT})
    else:
        answer = post_call(served.port, agent_token(), meta={"traceparent": AGENT_TRACEPARENT})
    assert answer["result"]["content"][0]["text"] == '{"text": "hi"}'
    span = receiver.named(SPAN_NAME, WAIT)
    # The bridge's span: a server span in the agent's trace, the child of the agent's span.
    assert (span.trace_id, span.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert span.kind == 2  # SERVER
    assert span.service == "clientmcp"
    assert span.status_code == 0  # a result: unset, not an error
    assert span.attributes == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "jsonrpc.request.id": "1",
        "clientmcp.outcome": "result",
    }
    # The app was handed the bridge's span, not the agent's: its own span becomes the bridge's child.
    (call,) = app.calls
    assert call["traceparent"] == f"00-{AGENT_TRACE}-{span.span_id}-01"
    assert "tracestate" not in call
    log = stopped_log(served)
    endpoint = f"{receiver.endpoint}/v1/traces"
    assert f" info tracing on: a span per tools/call, service clientmcp, to OTLP/HTTP {endpoint}\n" in log
    assert receiver.errors == []


def test_a_call_without_trace_context_starts_a_trace_the_app_joins(traced_bridge, receiver):
    served = traced_bridge(OTEL_SERVICE_NAME="edge-bridge")
    app = served_app(served)
    post_call(served.port, agent_token())
    span = receiver.named(SPAN_NAME, WAIT)
    assert span.parent_span_id == ""
    assert span.service == "edge-bridge"
    (call,) = app.calls
    prefix = f"00-{span.trace_id}-{span.span_id}-"
    assert call["traceparent"].startswith(prefix)
    # Sampled; the SDK may add W3C Trace Context 2's flag for a trace id it made at random (0x02).
    assert int(call["traceparent"][len(prefix) :], 16) & 0x01
    stopped_log(served)


def test_a_refused_call_has_its_error_span(traced_bridge, receiver):
    served = traced_bridge()
    # No app is connected: the agent gets a tool error at once, and the span says why.
    answer = post_call(served.port, agent_token("nobody"), headers={"traceparent": AGENT_TRACEPARENT})
    assert answer["result"]["isError"] is True
    span = receiver.named(SPAN_NAME, WAIT)
    assert (span.trace_id, span.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert span.status_code == 2  # ERROR
    assert span.attributes["error.type"] == "offline"
    assert span.attributes["clientmcp.outcome"] == "offline"
    stopped_log(served)


def test_spans_still_batched_at_sigterm_are_exported_before_exit(traced_bridge, receiver):
    # A batch sent once a minute: only the shutdown can send the call's span in time.
    served = traced_bridge(OTEL_BSP_SCHEDULE_DELAY="60000")
    served_app(served)
    post_call(served.port, agent_token(), headers={"traceparent": AGENT_TRACEPARENT})
    assert receiver.spans == []
    stopped_log(served)
    assert [span.name for span in receiver.spans] == [SPAN_NAME]


def test_an_unreachable_collector_costs_a_warning_not_the_calls(traced_bridge):
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    served = traced_bridge(OTEL_EXPORTER_OTLP_ENDPOINT=gone, OTEL_EXPORTER_OTLP_TIMEOUT="1")
    served_app(served)
    answer = post_call(served.port, agent_token(), headers={"traceparent": AGENT_TRACEPARENT})
    assert answer["result"]["content"][0]["text"] == '{"text": "hi"}'
    log = stopped_log(served)
    assert "Traceback" not in log
    # The exporter's own complaint (a warning while it retries, an error once it gives up), in the bridge's format.
    complaints = [line for line in log.splitlines() if " warn " in line or " error " in line]
    assert complaints and all("export" in line.lower() for line in complaints), log


def test_configured_without_the_extra_it_warns_once_and_serves(traced_bridge, receiver, tmp_path: Path):
    # A package `opentelemetry` with nothing in it, first on the path: as where the extra is not installed.
    (tmp_path / "opentelemetry").mkdir()
    (tmp_path / "opentelemetry" / "__init__.py").write_text("")
    path = environment().get("PYTHONPATH")
    served = traced_bridge(PYTHONPATH=f"{tmp_path}:{path}" if path else str(tmp_path))
    app = served_app(served)
    answer = post_call(served.port, agent_token(), headers={"traceparent": AGENT_TRACEPARENT})
    assert answer["result"]["content"][0]["text"] == '{"text": "hi"}'
    # Without tracing of its own, the bridge hands the app the agent's context as it came.
    (call,) = app.calls
    assert call["traceparent"] == AGENT_TRACEPARENT
    log = stopped_log(served)
    (warning,) = [line for line in log.splitlines() if "tracing" in line]
    assert " warn " in warning
    assert warning.endswith(
        "tracing: OpenTelemetry is configured (an OTLP endpoint is set) but the `otel` extra is not installed "
        "(opentelemetry.sdk cannot be imported): tracing is off; pip install 'clientmcp-fast[otel]'"
    )
    assert receiver.spans == []


def test_across_two_instances_each_traces_its_part(start_topology, receiver, monkeypatch):
    """A forwarded call: the agent's instance's span, then the app's instance's, its child, then the app."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    topology = start_topology()
    app = TracedApp(topology.app.ws_url, topology.app.token("client", "traced-app")).start()
    topology.sees("traced-app", 1)
    post_call(
        topology.agent.port,
        topology.agent.token("agent", "traced-app"),
        meta={"traceparent": AGENT_TRACEPARENT},
    )
    two = len(topology.bridges) == 2
    spans = receiver.wait_for(lambda spans: len(spans) == len(topology.bridges), WAIT)
    (agents,) = [span for span in spans if "jsonrpc.request.id" in span.attributes]
    assert (agents.trace_id, agents.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    last = agents
    if two:  # the app's instance: a call no agent posted there, the child of the agent's instance's span
        (apps,) = [span for span in spans if span is not agents]
        assert (apps.trace_id, apps.parent_span_id) == (AGENT_TRACE, agents.span_id)
        assert apps.kind == 2 and apps.attributes["clientmcp.outcome"] == "result"
        last = apps
    (call,) = app.calls
    assert call["traceparent"] == f"00-{AGENT_TRACE}-{last.span_id}-01"


@pytest.mark.parametrize("start_topology", ["two instances"], indirect=True)  # one process forwards nothing
def test_the_app_instances_span_names_the_tool(start_topology, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    topology = start_topology()
    TracedApp(topology.app.ws_url, topology.app.token("client", "traced-app")).start()
    topology.sees("traced-app", 1)
    post_call(topology.agent.port, topology.agent.token("agent", "traced-app"))
    spans = receiver.wait_for(lambda spans: len(spans) == len(topology.bridges), WAIT)
    assert [span.name for span in spans] == [SPAN_NAME] * len(topology.bridges)
    assert all(span.attributes["gen_ai.tool.name"] == "echo" for span in spans)
