"""A loopback OTLP/HTTP receiver: the collector side of the protocol, for telemetry tests.

It accepts `POST /v1/traces` and `POST /v1/metrics` with protobuf bodies (gzip-compressed or not), decodes
them with opentelemetry-proto's collector messages, answers as a collector does (200 with the protobuf
response), and keeps every request: decoded for assertions, raw to check what must never be sent. It is
not a mock of the SDK: whatever reaches it went through auger's exporter over a socket.

    with OtlpReceiver() as receiver:
        ... point [otel] endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) at receiver.base_url ...
        spans = receiver.spans()
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse,
)


def value_of(any_value: Any) -> Any:
    """An OTLP AnyValue as a Python value."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(any_value, kind)
    if kind == "array_value":
        return [value_of(v) for v in value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.values}
    return value


def attributes(proto: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in proto.attributes}


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int
    resource: dict[str, Any]


class OtlpReceiver:
    def __init__(self) -> None:
        self.raw: list[tuple[str, bytes]] = []  # (path, decompressed body)
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.headers.get("Content-Type") != "application/x-protobuf":
                    return self._answer(415, b"")
                if self.path == "/v1/traces":
                    message: Any = ExportTraceServiceRequest.FromString(body)
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    message = ExportMetricsServiceRequest.FromString(body)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    return self._answer(404, b"")
                with receiver._lock:
                    receiver.raw.append((self.path, body))
                    (receiver.traces if self.path == "/v1/traces" else receiver.metrics).append(message)
                self._answer(200, reply)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_until(self, ready: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver did not get what was expected within {timeout}s")
            time.sleep(0.05)

    def spans(self) -> list[Span]:
        found = []
        with self._lock:
            requests = list(self.traces)
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    for s in scope_spans.spans:
                        found.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                                          s.start_time_unix_nano, s.end_time_unix_nano, attributes(s),
                                          [(e.name, attributes(e)) for e in s.events], s.status.code, resource))
        return found

    def metric_points(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Metric name → [(attributes, point)] of its latest export (the SDK exports cumulative totals, so the
        latest holds them all; histogram points carry count and sum)."""
        points: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        with self._lock:
            requests = list(self.metrics)
        for request in requests:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        data = getattr(metric, metric.WhichOneof("data"))
                        points[metric.name] = [(attributes(p), p) for p in data.data_points]
        return points

    def raw_bytes(self) -> bytes:
        with self._lock:
            return b"".join(body for _, body in self.raw)
