"""A small OTLP/HTTP receiver for tests: spans posted to /v1/traces, decoded and kept.

It stands in for an OpenTelemetry collector: every process of a test (an agent, the bridge,
an app) exports to it over OTLP/HTTP with protobuf bodies, and the test reads back the spans
with their ids, so that it can check they form one trace. It runs in a thread of the test
process, on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as a collector got it: ids in lowercase hex (`parent_span_id` empty for a root span)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int  # the OTLP SpanKind: 2 is SERVER, 3 CLIENT, 1 INTERNAL
    service: str | None  # the resource's service.name
    status_code: int  # the OTLP StatusCode: 0 unset, 1 ok, 2 error
    attributes: dict[str, Any] = field(default_factory=dict)


def any_value(value: Any) -> Any:
    """An OTLP AnyValue as the Python value it holds."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: any_value(item.value) for item in value.kvlist_value.values}
    return getattr(value, kind)


def received_spans(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest body."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {item.key: any_value(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=span.kind,
                        service=resource.get("service.name"),
                        status_code=span.status.code,
                        attributes={item.key: any_value(item.value) for item in span.attributes},
                    )
                )
    return spans


class OtlpReceiver:
    """Keeps the spans POSTed to http://127.0.0.1:<port>/v1/traces; `endpoint` is for OTEL_EXPORTER_OTLP_ENDPOINT."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.errors: list[str] = []  # what was posted that is not a trace export
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                encoding = (self.headers.get("content-encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != TRACES_PATH or self.headers.get("content-type") != "application/x-protobuf":
                    receiver._refuse(f"{self.path} {self.headers.get('content-type')}")
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                receiver._received(received_spans(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test's output is for the test

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    def _received(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.requests += 1
            self.spans.extend(spans)

    def _refuse(self, what: str) -> None:
        with self._lock:
            self.errors.append(what)

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0, what: str = "spans"
    ) -> list[ReceivedSpan]:
        """Every span received, once `predicate` holds of them; AssertionError after `timeout` seconds."""
        give_up = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > give_up:
                raise AssertionError(f"no {what} within {timeout} s; received: {spans}")
            time.sleep(0.02)

    def named(self, name: str, timeout: float = 10.0) -> ReceivedSpan:
        """The one span called `name`, once it has come."""
        spans = self.wait_for(lambda spans: any(s.name == name for s in spans), timeout, f"span {name!r}")
        (span,) = [s for s in spans if s.name == name]
        return span


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver running for the block."""
    receiver = OtlpReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()
