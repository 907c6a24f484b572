"""Prometheus metrics on a listener of their own (`--metrics HOST:PORT`; docs/operations.md).

The core counts in plain integers (core/counters.py); `BridgeCollector` reads them, and the
bridge's gauges, when Prometheus scrapes: a call costs a few increments, never a lock or a
metric object. The listener serves `GET /metrics` in the text exposition format and nothing
else; it is never the public port, so it needs no token and no Origin rule. No label holds a
client ID, a tool name or any other value a client or agent chooses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)

from clientmcp_fast import __version__
from clientmcp_fast.core.agent_streams import LegacyStream
from clientmcp_fast.core.counters import DURATION_BUCKETS, ERAS, METHODS, OUTCOMES
from clientmcp_fast.core.directory import RemoteApp

if TYPE_CHECKING:
    from clientmcp_fast.core.counters import Counters
    from clientmcp_fast.net.nats import NatsCluster
    from clientmcp_fast.net.server import Server

# Close codes with a label of their own (docs/protocol.md, Close codes); an app may close with
# any code from 1000 to 4999, so the others are summed as "other".
CLOSE_CODES = (1000, 1001, 1002, 1006, 1007, 1009, 4400, 4401, 4408, 4409, 4429)
LAG_EVERY_SECONDS = 0.5
_MAX_HEAD_BYTES = 8192
# The classic text format, which every Prometheus reads (generate_latest writes it, names escaped
# to underscores).
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class BridgeCollector:
    """Reads the bridge's counters and gauges at scrape time."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.loop_lag = 0.0  # seconds a timer of the loop fired late, at the latest look

    def collect(self) -> Iterator[object]:
        from clientmcp_fast.speedups import build

        server = self.server
        bridge = server.bridge
        counters = bridge.counters
        # In a cluster the apps of other instances stand in `apps` too: each instance counts its
        # own, so that summing over instances (and workers) counts every app once.
        apps = [app for app in list(bridge.apps.values()) if not isinstance(app, RemoteApp)]
        yield _gauge(
            "clientmcp_apps_online", "Apps connected with a valid token, one per client ID", len(apps)
        )
        yield _gauge("clientmcp_app_connections", "App WebSocket connections open", bridge.app_connections)
        yield _counter(
            "clientmcp_app_connections_opened",
            "App WebSocket connections accepted",
            counters.app_connections_opened,
        )
        closed = CounterMetricFamily(
            "clientmcp_app_connections_closed",
            "App WebSocket connections closed, by close code",
            labels=["code"],
        )
        other = 0
        closes = dict(counters.closes)
        for code in CLOSE_CODES:
            closed.add_metric([str(code)], closes.pop(code, 0))
        other = sum(closes.values())
        closed.add_metric(["other"], other)
        yield closed
        tools = sum(len(app.toolset.tools) for app in apps if app.toolset is not None)
        yield _gauge("clientmcp_tools_registered", "Tools declared by the apps online", tools)
        registers = CounterMetricFamily(
            "clientmcp_registers", "Registers received from apps, by result", labels=["result"]
        )
        registers.add_metric(["accepted"], counters.registers_accepted)
        registers.add_metric(["refused"], counters.registers_refused)
        yield registers
        responses = CounterMetricFamily(
            "clientmcp_http_responses", "HTTP responses started, by status", labels=["status"]
        )
        for status, count in sorted(counters.responses().items()):
            responses.add_metric([str(status)], count)
        yield responses
        requests = CounterMetricFamily(
            "clientmcp_agent_requests",
            "JSON-RPC messages from agents (batch elements counted alone), by era and method",
            labels=["era", "method"],
        )
        counts = counters.requests_by_method()
        for era_index, era in enumerate(ERAS):
            for method_index, method in enumerate(METHODS):
                requests.add_metric([era, method], counts[era_index * len(METHODS) + method_index])
        yield requests
        transferred = CounterMetricFamily(
            "clientmcp_bytes", "Bytes read and written, by side and direction", labels=["side", "direction"]
        )
        transferred.add_metric(["http", "in"], counters.http_bytes_in)
        transferred.add_metric(["http", "out"], counters.http_bytes_out)
        transferred.add_metric(["websocket", "in"], counters.websocket_bytes_in)
        transferred.add_metric(["websocket", "out"], counters.websocket_bytes_out)
        yield transferred
        yield _counter(
            "clientmcp_calls_started", "tools/call requests sent to an app", counters.calls_started
        )
        calls = CounterMetricFamily(
            "clientmcp_calls", "tools/call requests answered, by outcome", labels=["outcome"]
        )
        for outcome, count in zip(OUTCOMES, counters.outcomes()):
            calls.add_metric([outcome], count)
        yield calls
        yield _gauge(
            "clientmcp_calls_in_flight", "Calls sent to an app and not answered yet", len(bridge.calls)
        )
        yield _counter(
            "clientmcp_calls_streamed",
            "Calls whose answer became an SSE stream (over 1 s)",
            counters.calls_streamed,
        )
        buckets = []
        total = 0
        for bound, count in zip((*DURATION_BUCKETS, float("inf")), counters.durations()):
            total += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
        yield HistogramMetricFamily(
            "clientmcp_call_duration_seconds",
            "Seconds from sending a call to an app to its end, whatever the outcome",
            buckets=buckets,
            sum_value=counters.duration_sum,
        )
        streams = GaugeMetricFamily(
            "clientmcp_notification_streams", "Notification streams open, by era", labels=["era"]
        )
        legacy = sum(
            1
            for open_streams in list(bridge.streams.values())
            for s in open_streams
            if type(s) is LegacyStream
        )
        streams.add_metric(["legacy"], legacy)
        streams.add_metric(["modern"], bridge.stream_count - legacy)
        yield streams
        yield _counter(
            "clientmcp_list_changed_sent",
            "notifications/tools/list_changed sent to notification streams",
            counters.list_changed_sent,
        )
        yield _gauge(
            "clientmcp_event_loop_lag_seconds",
            "How late a timer of the event loop fired, at the latest look",
            self.loop_lag,
        )
        info = InfoMetricFamily("clientmcp_build", "The bridge's version and build (compiled or pure)")
        info.add_metric([], {"version": __version__, "implementation": build()})
        yield info
        if server.cluster is not None:
            yield from _cluster(server.cluster, counters)


def _cluster(cluster: NatsCluster, counters: Counters) -> Iterator[object]:
    """With --nats (docs/scaling.md): the NATS connection, the other instances, the calls between them."""
    directory = cluster.directory
    yield _gauge(
        "clientmcp_cluster_connected",
        "1 while this instance is connected to NATS, else 0",
        directory.connected,
    )
    yield _counter(
        "clientmcp_cluster_reconnects",
        "Times the NATS connection came back after it was lost",
        cluster.reconnects,
    )
    yield _gauge(
        "clientmcp_cluster_instances", "Other bridge instances heard from lately", len(directory.peers)
    )
    yield _gauge(
        "clientmcp_cluster_remote_apps",
        "Apps held by other instances, as this instance knows them",
        len(directory.claims) - len(directory.local),
    )
    over = sum(
        1 for app in list(cluster.server.bridge.apps.values()) if type(app) is RemoteApp and app.over_bound
    )
    yield _gauge(
        "clientmcp_cluster_remote_apps_without_tools",
        "Apps held by other instances whose tools this one does not keep (--max-remote-apps)",
        over,
    )
    yield _counter(
        "clientmcp_cluster_tools_not_kept",
        "Times an app held elsewhere was left without its tools here for --max-remote-apps",
        directory.not_kept,
    )
    for name, documentation, counts in (
        (
            "clientmcp_cluster_calls_forwarded",
            "tools/call requests of agents here for apps held by another instance, by outcome",
            counters.forwarded,
        ),
        (
            "clientmcp_cluster_calls_served",
            "tools/call requests of agents on another instance run on apps held here, by outcome",
            counters.served,
        ),
    ):
        family = CounterMetricFamily(name, documentation, labels=["outcome"])
        for outcome, count in zip(OUTCOMES, counts):
            family.add_metric([outcome], count)
        yield family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def registry_for(server: Server) -> tuple[CollectorRegistry, BridgeCollector]:
    """A registry of the bridge's metrics and the process's (CPU, memory, descriptors, start time)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = BridgeCollector(server)
    registry.register(collector)  # type: ignore[arg-type]
    ProcessCollector(registry=registry)
    return registry, collector


class _MetricsProtocol(asyncio.Protocol):
    """One scrape: `GET /metrics` answered, anything else 404 or 405; then the connection closes."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.head = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.head += data
        if b"\r\n\r\n" not in self.head and b"\n\n" not in self.head:
            if len(self.head) > _MAX_HEAD_BYTES:
                self._answer(
                    b"431 Request Header Fields Too Large", b"text/plain", b"request head too large\n"
                )
            return
        line = self.head.split(b"\n", 1)[0].strip().split()
        method, target = (line[0], line[1]) if len(line) >= 2 else (b"", b"")
        path = target.split(b"?", 1)[0]
        if path != b"/metrics":
            self._answer(b"404 Not Found", b"text/plain", b"not found: the metrics are at /metrics\n")
        elif method not in (b"GET", b"HEAD"):
            self._answer(b"405 Method Not Allowed", b"text/plain", b"GET /metrics\n")
        else:
            body = generate_latest(self.registry)
            self._answer(b"200 OK", CONTENT_TYPE, body if method == b"GET" else b"", len(body))

    def _answer(self, status: bytes, content_type: bytes, body: bytes, length: int | None = None) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        head = (
            b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type
            + b"\r\ncontent-length: " + str(len(body) if length is None else length).encode()
            + b"\r\nconnection: close\r\n\r\n"
        )  # fmt: skip
        transport.write(head + body)
        transport.close()


class MetricsListener:
    """The metrics listener and the event-loop lag probe, both only with `--metrics`."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.registry, self.collector = registry_for(server)
        self._listener: asyncio.base_events.Server | None = None
        self._probe: asyncio.TimerHandle | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        """Listen on host:port (0: any free port; `port` is the bound one afterwards); raises OSError."""
        loop = self.server.loop
        self._listener = await loop.create_server(
            lambda: _MetricsProtocol(self.registry), host, port, reuse_address=True
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        self._arm(loop.time())

    def _arm(self, now: float) -> None:
        self._due = now + LAG_EVERY_SECONDS
        self._probe = self.server.loop.call_at(self._due, self._look)

    def _look(self) -> None:
        now = self.server.loop.time()
        self.collector.loop_lag = max(0.0, now - self._due)
        self._arm(now)

    async def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
            self._listener = None
