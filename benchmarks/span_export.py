"""What ``--otlp-endpoint`` costs a Locust process: CPU µs per request to make its span from the record
(``SpanExport.export``, in the user's greenlet after the request ended), CPU µs per span to encode and
POST the batches (the batch processor's greenlet; the receiver, which only reads the bytes, is a process of its own),
and how long encoding one batch holds the event loop.

    python benchmarks/span_export.py [--requests 5000] [--batch 16]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from llmload.metrics.record import RequestMeta, RequestRecord  # noqa: E402
from llmload.plugin.output import span_export  # noqa: E402
from llmload.plugin.output.span_export import SpanExport  # noqa: E402

SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def record(i: int) -> RequestRecord:
    meta = RequestMeta(f"w0bench-{i}", 1.7e9 + i * 0.01, "chat", max_tokens=128, users=64, session_id="")
    meta.trace_id, meta.span_id = os.urandom(16).hex(), os.urandom(8).hex()
    return RequestRecord(meta=meta, status="ok", http_status=200, ttft_ms=120.5, ttft_visible_ms=120.5, tpot_ms=8.25,
                         e2e_ms=1168.3, itl_max_ms=30.1, prompt_tokens=512, cached_tokens=0, completion_tokens=128,
                         finish_reason="length", token_source="usage")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=span_export.BATCH_SPANS, help="spans per export")
    args = ap.parse_args()
    n = args.requests
    span_export.BATCH_SPANS = args.batch
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
    spans = SpanExport(url, [], types.SimpleNamespace(run_id="bench"))
    spans.describe("chat", "chat", "llama-3-8b", "http://127.0.0.1:8000")
    records = [record(i) for i in range(n)]
    cpu = time.process_time()
    for rec in records:
        spans.export(rec)
    export_us = (time.process_time() - cpu) / n * 1e6
    cpu = time.process_time()
    spans.flush()
    flush_us = (time.process_time() - cpu) / n * 1e6

    # one batch, encoded as the exporter does it: the loop is held that long (the POST itself is I/O)
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    spans.provider.add_span_processor(SimpleSpanProcessor(memory))
    for rec in records[:args.batch]:
        spans.export(rec)
    batch = memory.get_finished_spans()
    holds = []
    for _ in range(20):
        t = time.perf_counter()
        encode_spans(batch).SerializePartialToString()
        holds.append((time.perf_counter() - t) * 1000)
    holds.sort()
    spans.flush()
    print(f"{n} requests: span from the record {export_us:.1f} CPU µs/request; encode + POST "
          f"{flush_us:.1f} CPU µs/span; encoding one batch of "
          f"{len(batch)} spans holds the loop {holds[len(holds) // 2]:.2f} ms (median of 20), {holds[-1]:.2f} ms "
          "(worst)")
    sink.terminate()


if __name__ == "__main__":
    main()
