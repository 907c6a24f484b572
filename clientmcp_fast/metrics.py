"""Prometheus metrics on a listener of their own (`--metrics HOST:PORT`; docs/operations.md).

The core counts in plain integers (core/counters.py); `BridgeCollector` reads them, and the
bridge's gauges, when Prometheus scrapes: a call costs a few increments, never a lock or a
metric object. The listener serves `GET /metrics` in the text exposition format and nothing
else; it is never the public port, so it needs no token and no Origin rule. No label holds a
client ID, a tool name or any other value a client or agent chooses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)

from clientmcp_fast import __version__
from clientmcp_fast.core.agent_streams import LegacyStream
from clientmcp_fast.core.counters import DURATION_BUCKETS, ERAS, METHODS, REFUSALS
from clientmcp_fast.core.outcomes import Outcome
from clientmcp_fast.log import logger
from clientmcp_fast.net.server import FILES_WARN_EVERY_SECONDS as WARN_EVERY_SECONDS
from clientmcp_fast.net.server import timeout_sweep_every

if TYPE_CHECKING:
    from clientmcp_fast.core.counters import Counters
    from clientmcp_fast.net.nats import NatsCluster
    from clientmcp_fast.net.oauth import OAuthEndpoints
    from clientmcp_fast.net.server import Server

# Close codes with a label of their own (docs/protocol.md, Close codes); an app may close with
# any code from 1000 to 4999, so the others are summed as "other".
CLOSE_CODES = (1000, 1001, 1002, 1006, 1007, 1009, 4400, 4401, 4408, 4409, 4429)
LAG_EVERY_SECONDS = 0.5
_MAX_HEAD_BYTES = 8192
# Scrapers are few (a Prometheus or two, an agent of the host, a person with curl): 64 is many
# times what they need, yet bounds the descriptors the listener can take (docs/limits.md).
MAX_METRICS_CONNECTIONS = 64
# The `outcome` label of each call counter, in the order of their counts (indexed by Outcome).
_OUTCOME_LABELS = tuple(outcome.label for outcome in Outcome)
# What a connection's deadline is timing: a head (or a new connection's first), or idleness.
_HEAD, _IDLE = 0, 1
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
        apps = [app for app in list(bridge.apps.values()) if not bridge.router.is_remote(app)]
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
        yield _counters_by(
            "clientmcp_calls",
            "tools/call requests answered, by outcome",
            "outcome",
            _OUTCOME_LABELS,
            counters.outcomes(),
        )
        yield _counters_by(
            "clientmcp_agent_refusals",
            "Agents refused for their token's scope (a hidden tool called), rate or calls in flight",
            "reason",
            REFUSALS,
            counters.refusals,
        )
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
        if server.oauth is not None:
            yield from _oauth(server.oauth)


def _oauth(oauth: OAuthEndpoints) -> Iterator[object]:
    """With --oauth on (docs/oauth.md): refusals, tokens issued, clients registered, what is remembered."""
    refusals = CounterMetricFamily(
        "clientmcp_oauth_refusals",
        "OAuth requests refused, by endpoint and RFC error (docs/oauth.md)",
        labels=["endpoint", "error"],
    )
    for (endpoint, error), count in sorted(oauth.refusals.items()):
        refusals.add_metric([endpoint, error], count)
    yield refusals
    server = oauth.authorization
    issued = CounterMetricFamily(
        "clientmcp_oauth_tokens_issued",
        "Token responses of /oauth/token, by grant type",
        labels=["grant_type"],
    )
    for grant_type, count in server.tokens_issued.items():
        issued.add_metric([grant_type], count)
    yield issued
    yield _counter(
        "clientmcp_oauth_clients_registered",
        "Clients registered at /oauth/register (nothing is stored: each is its client_id)",
        oauth.clients_registered,
    )
    remembered = GaugeMetricFamily(
        "clientmcp_oauth_remembered",
        "Used codes and refresh tokens, ended grants, requests waiting for consent and client metadata documents, "
        "this process remembers",
        labels=["kind"],
    )
    forgotten = CounterMetricFamily(
        "clientmcp_oauth_forgotten",
        "Of those, entries dropped for the bound before they expired (a replay of a credential is then not caught)",
        labels=["kind"],
    )
    memories: list[tuple[str, Any]] = [
        ("codes", server.used_codes),
        ("refresh_tokens", server.used_refresh_tokens),
        ("ended_grants", server.revoked_grants),
        ("consents", oauth.server.bridge.consents),
    ]
    documents = oauth.documents
    if documents is not None:
        memories.append(("client_documents", documents))
    for kind, used in memories:
        remembered.add_metric([kind], len(used))
        forgotten.add_metric([kind], used.forgotten)
    yield remembered
    yield forgotten
    if documents is not None:
        yield _counter(
            "clientmcp_oauth_client_document_fetches",
            "Client ID metadata documents fetched: the requests this process made to a URL a client named",
            documents.fetches,
        )
    answers = CounterMetricFamily(
        "clientmcp_oauth_consents",
        "Apps' answers to consent requests, counted where the app is connected, by answer (allow, deny)",
        labels=["answer"],
    )
    for answer, count in oauth.server.bridge.consents.answers.items():
        answers.add_metric([answer], count)
    yield answers
    yield _counter(
        "clientmcp_oauth_codes_issued",
        "Authorization codes issued: the app allowed and its person typed the code",
        oauth.codes_issued,
    )


def _cluster(cluster: NatsCluster, counters: Counters) -> Iterator[object]:
    """With --nats (docs/scaling.md): the NATS connection, the other instances, the calls between them."""
    directory = cluster.directory
    nc = cluster.nc
    yield _gauge(
        "clientmcp_cluster_connected",
        "1 while this instance is connected to NATS, else 0",
        directory.connected and nc is not None and nc.is_connected,
    )
    yield _counters_by(
        "clientmcp_cluster_messages_dropped",
        "Bus messages not taken, by reason: unsigned, forged, stale, replayed, malformed (docs/scaling.md)",
        "reason",
        directory.dropped.keys(),
        directory.dropped.values(),
    )
    yield _counter(
        "clientmcp_cluster_restarts",
        "Times this instance started over with the others after its own stall (docs/scaling.md)",
        directory.restarts,
    )
    yield _counter(
        "clientmcp_cluster_reconnects",
        "Times the NATS connection came back after it was lost",
        cluster.connection.reconnects,
    )
    yield _gauge(
        "clientmcp_cluster_instances", "Other bridge instances heard from lately", len(directory.peers)
    )
    yield _gauge(
        "clientmcp_cluster_remote_apps",
        "Apps held by other instances, as this instance knows them",
        len(directory.claims) - len(directory.local),
    )
    over = sum(1 for app in list(directory.forwarding.remote.values()) if app.over_bound)
    yield _gauge(
        "clientmcp_cluster_remote_apps_without_tools",
        "Apps held by other instances whose tools this one does not keep (--max-remote-apps)",
        over,
    )
    yield _counter(
        "clientmcp_cluster_tools_not_kept",
        "Times an app held elsewhere was left without its tools here for --max-remote-apps",
        directory.forwarding.not_kept,
    )
    yield _counters_by(
        "clientmcp_cluster_calls_forwarded",
        "tools/call requests of agents here for apps held by another instance, by outcome",
        "outcome",
        _OUTCOME_LABELS,
        counters.forwarded,
    )
    yield _counters_by(
        "clientmcp_cluster_calls_served",
        "tools/call requests of agents on another instance run on apps held here, by outcome",
        "outcome",
        _OUTCOME_LABELS,
        counters.served,
    )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def _counters_by(
    name: str, documentation: str, label: str, values: Iterable[str], counts: Iterable[float]
) -> CounterMetricFamily:
    """A counter of one label: a sample for each of `values`, counted by `counts` in the same order."""
    family = CounterMetricFamily(name, documentation, labels=[label])
    for value, count in zip(values, counts):
        family.add_metric([value], count)
    return family


def registry_for(server: Server) -> tuple[CollectorRegistry, BridgeCollector]:
    """A registry of the bridge's metrics and the process's (CPU, memory, descriptors, start time)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = BridgeCollector(server)
    registry.register(collector)  # type: ignore[arg-type]
    ProcessCollector(registry=registry)
    return registry, collector


class _MetricsProtocol(asyncio.Protocol):
    """One scraper's connection: `GET /metrics` answered, anything else 404 or 405; kept alive between scrapes."""

    def __init__(self, listener: MetricsListener) -> None:
        self.listener = listener
        self.head = b""  # bytes received and not yet answered
        self.transport: asyncio.Transport | None = None
        self.deadline: float | None = None  # when the timeout of `_phase` closes the connection
        self._phase = _HEAD
        self._write_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self.listener.admit(self):
            transport.close()
            return
        # As on the main port, a new connection has the head timeout to send its first request.
        self.deadline = self.listener.time() + self.listener.head_timeout

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        self.head += data
        self._serve()

    def pause_writing(self) -> None:
        # A scraper that does not read gets nothing more answered (nor read) until it catches up.
        self._write_paused = True
        self.transport.pause_reading()  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        self._write_paused = False
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()
            self._serve()

    def _serve(self) -> None:
        """Answer every complete request received, in order; then arm the timeout of what is left."""
        transport = self.transport
        while transport is not None and not transport.is_closing() and not self._write_paused:
            head = self.head
            ends = [at + len(blank) for blank in (b"\r\n\r\n", b"\n\n") if (at := head.find(blank)) >= 0]
            end = min(ends) if ends else None
            # Refused whether or not it ended: one read could bring a whole head past the bound.
            if (len(head) if end is None else end) > _MAX_HEAD_BYTES:
                self._answer(
                    b"431 Request Header Fields Too Large", b"text/plain", b"request head too large\n"
                )
                return
            if end is None:
                self._arm(_HEAD if head else _IDLE)
                return
            self.head = head[end:]
            self._answer_request(head[:end])

    def _answer_request(self, head: bytes) -> None:
        """Answer one request head; the connection stays only for a bodiless HTTP/1.1 request."""
        lines = head.split(b"\n")
        line = lines[0].strip().split()
        method, target, version = (line + [b"", b"", b""])[:3]
        fields = {}
        for field in lines[1:]:
            name, _, value = field.partition(b":")
            fields[name.strip().lower()] = value.strip().lower()
        # A request with a body is answered, then closed: a scrape has none, and skipping one
        # would mean reading it.
        keep = (
            version == b"HTTP/1.1"
            and fields.get(b"connection") != b"close"
            and fields.get(b"content-length", b"0") == b"0"
            and b"transfer-encoding" not in fields
        )
        path = target.split(b"?", 1)[0]
        if path != b"/metrics":
            self._answer(
                b"404 Not Found", b"text/plain", b"not found: the metrics are at /metrics\n", keep=keep
            )
        elif method not in (b"GET", b"HEAD"):
            self._answer(b"405 Method Not Allowed", b"text/plain", b"GET /metrics\n", keep=keep)
        else:
            body = generate_latest(self.listener.registry)
            self._answer(b"200 OK", CONTENT_TYPE, body if method == b"GET" else b"", len(body), keep=keep)

    def _answer(
        self,
        status: bytes,
        content_type: bytes,
        body: bytes,
        length: int | None = None,
        *,
        keep: bool = False,
    ) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        head = (
            b"HTTP/1.1 " + status + b"\r\ncontent-type: " + content_type
            + b"\r\ncontent-length: " + str(len(body) if length is None else length).encode()
            + (b"\r\n\r\n" if keep else b"\r\nconnection: close\r\n\r\n")
        )  # fmt: skip
        transport.write(head + body)
        if not keep:
            transport.close()
            # Counted until it is gone: a peer that does not read the answer holds it open,
            # until the keep-alive timeout aborts it.
            self._arm(_IDLE)

    def _arm(self, phase: int) -> None:
        """Time `phase`: a head (or its absence) by the head timeout, idleness by the keep-alive one."""
        # The clock is read only when the phase changes, as on the main port (net/http.py).
        if phase != self._phase:
            self._phase = phase
            listener = self.listener
            self.deadline = listener.time() + (
                listener.head_timeout if phase == _HEAD else listener.keepalive_timeout
            )

    def expire(self) -> None:
        """Its head or keep-alive timeout passed: closed without a word, unsent bytes dropped."""
        self.deadline = None
        self.listener.connections.discard(self)
        if self.transport is not None:
            # Aborted, not closed: a peer that does not read would hold a closing transport open.
            self.transport.abort()


class MetricsListener:
    """The metrics listener and the event-loop lag probe, both only with `--metrics`.

    Its connections are bounded as the main port's are (docs/limits.md): at most
    `MAX_METRICS_CONNECTIONS`, each closed at the main port's head and keep-alive timeouts.
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        self.registry, self.collector = registry_for(server)
        self._listener: asyncio.base_events.Server | None = None
        self._probe: asyncio.TimerHandle | None = None
        self.port = 0
        self.time = server.loop.time
        self.head_timeout = server.limits.head_timeout
        self.keepalive_timeout = server.limits.keepalive_timeout
        self.connections: set[_MetricsProtocol] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_every = timeout_sweep_every(server.limits)
        self._warned_at: float | None = None
        self._stopping = False

    async def start(self, host: str, port: int) -> None:
        """Listen on host:port (0: any free port; `port` is the bound one afterwards); raises OSError."""
        loop = self.server.loop
        self._listener = await loop.create_server(
            lambda: _MetricsProtocol(self), host, port, reuse_address=True
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        self._arm(loop.time())

    def admit(self, conn: _MetricsProtocol) -> bool:
        """Take a new connection, unless the cap is reached (then warn, at most once a minute)."""
        if self._stopping:
            return False
        if len(self.connections) >= MAX_METRICS_CONNECTIONS:
            now = self.time()
            if self._warned_at is None or now - self._warned_at >= WARN_EVERY_SECONDS:
                self._warned_at = now
                logger.warning(
                    "metrics listener at its cap of %d connections: new ones are closed at once "
                    "until some end (the head and keep-alive timeouts end idle ones)",
                    MAX_METRICS_CONNECTIONS,
                )
            return False
        self.connections.add(conn)
        if self._sweep is None:
            self._sweep = self.server.loop.call_later(self._sweep_every, self._expire_due)
        return True

    def _expire_due(self) -> None:
        """Close the connections whose timeout passed; look again while any is open."""
        now = self.time()
        for conn in list(self.connections):
            if conn.deadline is not None and conn.deadline <= now:
                conn.expire()
        self._sweep = (
            self.server.loop.call_later(self._sweep_every, self._expire_due) if self.connections else None
        )

    def _arm(self, now: float) -> None:
        self._due = now + LAG_EVERY_SECONDS
        self._probe = self.server.loop.call_at(self._due, self._look)

    def _look(self) -> None:
        now = self.server.loop.time()
        self.collector.loop_lag = max(0.0, now - self._due)
        self._arm(now)

    async def stop(self) -> None:
        """Stop listening, end every connection and the lag probe."""
        self._stopping = True
        for handle in (self._probe, self._sweep):
            if handle is not None:
                handle.cancel()
        self._probe = self._sweep = None
        if self._listener is not None:
            self._listener.close()
        # A scraper's keep-alive connection would hold wait_closed until it timed out.
        for conn in list(self.connections):
            conn.expire()
        if self._listener is not None:
            await self._listener.wait_closed()
            self._listener = None
