"""A tiny OTLP/HTTP trace receiver on 127.0.0.1: decodes each ``ExportTraceServiceRequest`` (protobuf,
gzip or not) with the opentelemetry-proto package and keeps its spans, flattened to dicts.

Usage::

    with OtlpReceiver() as rx:
        run(... "--otlp-endpoint", rx.url ...)
        spans = rx.wait_for(n, timeout=20)       # [{"trace_id": hex, "span_id": hex, "name", "kind",
                                                 #   "start_ns", "end_ns", "attributes": {...}, "status"}]
"""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[dict[str, Any]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out = []
    for rs in req.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append({"trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex(), "name": s.name, "kind": s.kind,
                            "start_ns": s.start_time_unix_nano, "end_ns": s.end_time_unix_nano,
                            "attributes": {a.key: _value(a.value) for a in s.attributes},
                            "status": s.status.code, "resource": resource})
    return out


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.posts = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                spans = decode(body) if self.path == "/v1/traces" else []
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.posts += 1
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, n: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The spans received, once there are at least ``n`` (or the timeout has passed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= n:
                    break
            time.sleep(0.05)
        with self._lock:
            return list(self.spans)
