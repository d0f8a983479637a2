"""HTTP front of the mock engine: a small HTTP/1.1 server on gevent.

One *driver* greenlet owns the engine: it sleeps until the engine's next event, advances it,
and writes each sequence's new tokens straight to that sequence's socket (non-blocking; a
slow reader's leftover bytes go to a per-stream outbox its handler greenlet flushes). Writing
from the driver keeps a step's tokens leaving together, as a real engine's do, and saves a
greenlet switch per token. Each connection's handler greenlet parses requests, answers the
simple routes and waits while its stream is served; a libev read watcher notices a client
that hangs up and frees its slot at once.

Hand-written instead of pywsgi because the mock must stream >= 20k tokens/s from one core
(see benchmarks/mock_capacity.py) and must control exactly when bytes leave.
"""

from __future__ import annotations

import errno
import json
import logging
import random
import socket
from time import perf_counter

import gevent
import gevent.event
from gevent.server import StreamServer

from llmload.mock.api import openai_api as api
from llmload.mock.api.admin_api import ADMIN_PATHS, AdminLog, serve_admin
from llmload.mock.api.embeddings_api import EmbeddingBatcher
from llmload.mock.api.handler import PlainApi, StreamApi
from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.fixed_engine import FixedEngine
from llmload.mock.engine.metrics_state import EngineStats, LatencyHistogram
from llmload.mock.engine.priority_engine import make_engine
from llmload.mock.engine.spec_decode import SpecDecode
from llmload.mock.front.body_endpoints import serve_plain
from llmload.mock.front.completion import serve_completion
from llmload.mock.front.faults import Fault, FaultPicker
from llmload.mock.front.http_request import RequestError, parse_request
from llmload.mock.front.lora import LoraSlots
from llmload.mock.front.served_stream import ServedStream
from llmload.mock.options import MockConfig
from llmload.mock.telemetry.gpu_telemetry import GpuMeter, render_dcgm
from llmload.mock.telemetry.prometheus import render_metrics
from llmload.mock.telemetry.request_log import RequestLog
from llmload.net import timestamps as netstamp
from llmload.wire.endpoints import ENDPOINTS, part

log = logging.getLogger("llmload.mock")

SPIN_S = 0.0015  # the last stretch before a step ends is waited by yielding, not by a timer
LAG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.1, 1.0)
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           411: "Length Required", 413: "Payload Too Large", 429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable"}


def _recv_stamped(sock: socket.socket, size: int, timestamps: bool) -> tuple[bytes, float]:
    """recv plus the kernel's receive time of the bytes, on the perf_counter clock."""
    if not timestamps:
        return sock.recv(size), perf_counter()
    data, anc, _flags, _addr = sock.recvmsg(size, netstamp.ANC_SIZE)
    t = netstamp.stamp(anc, netstamp.clock_offset())
    return data, perf_counter() if t is None else t


class MockServer:
    """The mock's HTTP server. ``start()`` binds and returns the address; ``stop()`` ends it."""

    def __init__(self, config: MockConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
        self.config = config
        if config.engine_params is None:
            self.engine: BatchingEngine | FixedEngine = FixedEngine(config.fixed_ttft_ms, config.fixed_itl_ms)
        else:
            self.engine = make_engine(config.engine_params, config.scheduling)
        self.max_model_len = config.engine_params.max_model_len if config.engine_params else 1_000_000
        self.engine.stats = EngineStats(config.metrics_format, self.max_model_len)
        if config.spec_acceptance is not None:
            self.engine.stats.spec = SpecDecode(config.spec_acceptance, config.spec_tokens, config.seed or 0)
        self.gpu = GpuMeter(config.gpu, perf_counter())  # its clock restarts at start()
        self.engine.gpu = self.gpu
        self.faults = FaultPicker(config.fault_rates, config.seed)
        self.handlers = {e.path: part(e.mock) for e in ENDPOINTS if e.mock}  # path -> StreamApi, PlainApi, BodyApi
        self.lora = LoraSlots(config.lora, config.model) if config.lora is not None else None  # --lora-adapters
        self._rng = random.Random(config.seed)
        self._wake = gevent.event.Event()
        self._server = StreamServer((host, port), self._handle, backlog=4096)
        self._driver: gevent.Greenlet | None = None
        self._log: RequestLog | None = None
        self.admin_log = AdminLog(config.admin_log_path) if config.admin_log_path else None  # admin_api
        self.profiling = False  # /start_profile .. /stop_profile
        self._ids = 0
        self.requests_total = 0
        self.embedder: EmbeddingBatcher | None = None  # /v1/embeddings: started by the first request
        self.ranker: EmbeddingBatcher | None = None  # /v1/rerank and /v1/score: the same, by pairs
        self.transcriber: EmbeddingBatcher | None = None  # /v1/audio/transcriptions: by seconds of audio
        self.connections = 0  # open right now
        self.requests_by_outcome: dict[str, int] = {}
        # How late each engine event was handled vs. its modelled time (benchmarks read it).
        self.lag = LatencyHistogram(LAG_BUCKETS)
        self.write_span = LatencyHistogram(LAG_BUCKETS)  # first to last write of one event's tokens

    @property
    def address(self) -> tuple[str, int]:
        return self._server.address[0], self._server.address[1]

    def start(self) -> tuple[str, int]:
        if self.config.log_path:
            self._log = RequestLog(self.config.log_path)
            self._log.start()
        self._server.start()
        self.gpu.t0 = perf_counter()
        self._driver = gevent.spawn(self._drive)
        return self.address

    def stop(self) -> None:
        self._server.stop(timeout=1)
        if self._driver is not None:
            self._driver.kill()
            self._driver = None
        for batcher in (self.embedder, self.ranker, self.transcriber):
            if batcher is not None:
                batcher.stop()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.admin_log is not None:
            self.admin_log.close()
            self.admin_log = None

    # -- the engine's clock --------------------------------------------------------------------
    def _drive(self) -> None:
        engine = self.engine
        wake = self._wake
        # Only the batching engine's steps need sub-millisecond starts; the fixed engine's token
        # times are whatever the log says, and spinning for it would starve a client sharing the box.
        spin = SPIN_S if isinstance(engine, BatchingEngine) else 0.0
        while True:
            t = engine.next_event_time()
            if t is None:
                wake.wait()
                wake.clear()
                continue
            delay = t - perf_counter()
            # A submit may create an earlier event (idle engine): wake and look again.
            if delay > spin and wake.wait(delay - spin):
                wake.clear()
                continue
            # libev rounds timer waits to whole milliseconds; yield-spin the last stretch so
            # steps leave on the modelled time (benchmarks/mock_capacity.py measures the lag).
            while perf_counter() < t:
                gevent.sleep(0)
            now = perf_counter()
            self.lag.observe(now - t)
            emissions = engine.advance(now)
            for em in emissions:
                em.seq.user.on_emission(em.tokens, em.first, em.finished, em.generated)
            if emissions:
                self.write_span.observe(perf_counter() - now)

    # -- HTTP ------------------------------------------------------------------------------------
    def _handle(self, sock: socket.socket, _addr: object) -> None:
        self.connections += 1
        try:
            if self.connections > self.config.max_connections:
                self._send(sock, 503, api.error_body(503, f"more than {self.config.max_connections} connections "
                                                          "open (--max-connections)"), close=True)
                return
            self._serve_connection(sock)
        except OSError as e:  # TimeoutError included: the client went idle past --idle-timeout
            if e.errno not in (errno.ECONNRESET, errno.EPIPE, errno.EBADF, None):
                log.debug("connection error: %s", e)
        finally:
            self.connections -= 1
            try:
                sock.close()
            except OSError:
                pass

    def _serve_connection(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The handler's own reads and flushes wait at most this long; the driver writes tokens to
        # the raw socket, which the timeout does not touch.
        sock.settimeout(self.config.idle_timeout_s)
        timestamps = netstamp.enable(sock)
        buf = bytearray()  # appended in place: a 64 MiB body costs its length, not its length squared
        rx_mono = perf_counter()
        while True:
            try:
                req, used = parse_request(buf)
                while req is None:
                    data, rx_mono = _recv_stamped(sock, max(65536, used - len(buf)), timestamps)
                    if not data:
                        return
                    buf += data
                    if used and len(buf) < used:
                        continue  # the head is parsed and the body is still arriving: no need to parse again
                    req, used = parse_request(buf)
            except RequestError as e:
                self._send(sock, e.status, api.error_body(e.status, e.message), close=True)
                return
            del buf[:used]
            if not self._route(sock, req.method, req.path, req.headers, req.body, rx_mono):
                return
            if not req.keep_alive:
                return

    def _send(self, sock: socket.socket, status: int, body: bytes, content_type: str = "application/json",
              close: bool = False, extra: str = "") -> None:
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\ncontent-type: {content_type}\r\n{extra}"
            f"content-length: {len(body)}\r\n{'connection: close' + chr(13) + chr(10) if close else ''}\r\n"
        )
        sock.sendall(head.encode() + body)

    def _route(self, sock, method: str, path: str, headers: dict[str, str], body: bytes, rx_mono: float) -> bool:
        """Serve one request; False when the connection must end."""
        handler = self.handlers.get(path)  # an endpoint's, as llmload.wire.endpoints declares it
        if isinstance(handler, StreamApi):
            if method != "POST":
                self._send(sock, 405, api.error_body(405, f"{path} takes POST"))
                return True
            return serve_completion(self, sock, handler, headers, body, rx_mono)
        if handler is not None and method == "POST":
            if isinstance(handler, PlainApi):
                return serve_plain(self, sock, handler, path, headers, body, rx_mono)
            return handler.serve(self, sock, path, headers, body, rx_mono)
        if path in ADMIN_PATHS:  # the cache resets and the profiler (admin_api)
            serve_admin(self, sock, method, path, body)
            return True
        if method != "GET":
            self._send(sock, 405, api.error_body(405, f"{path} takes GET"))
        elif path == "/health":
            self._send(sock, 200, b"", "text/plain")
        elif path == "/v1/models" and self.lora is not None:  # the base model and its adapters
            self._send(sock, 200, self.lora.models_body(self.max_model_len))
        elif path == "/v1/models":
            model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "llmload-mock",
                     "max_model_len": self.max_model_len}
            self._send(sock, 200, json.dumps({"object": "list", "data": [model]}).encode())
        elif path == "/metrics":
            text = render_metrics(self.engine, self.config.model, self.requests_by_outcome, self.lag,
                                  self.write_span) + (self.lora.metrics_text() if self.lora is not None else "")
            self._send(sock, 200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/dcgm/metrics":  # where dcgm-exporter would be (its own :9400/metrics)
            self._send(sock, 200, render_dcgm(self.gpu, perf_counter()).encode(), "text/plain; version=0.0.4")
        else:
            self._send(sock, 404, api.error_body(404, f"no route {path}"))
        return True

    def _log_request(self, rid: str, arrival_mono: float, arrival_unix: float, stream: ServedStream | None,
                     outcome: str, prompt_tokens: int, cached: int, fault: Fault | None = None,
                     image_tokens: int = 0, reply: str = "", session: str | None = None,
                     traceparent: str | None = None) -> None:
        self.requests_by_outcome[outcome] = self.requests_by_outcome.get(outcome, 0) + 1
        if stream is not None:  # vLLM's finished_reason: a tool call is a stop; a client gone, an abort
            self.engine.stats.finished_as({"completed": "length" if stream.finish_reason == "length" else "stop",
                                           "disconnected": "abort"}.get(outcome, "error"))
        if self._log is None:
            return
        entry = {
            "request_id": rid,
            "arrival_unix": round(arrival_unix, 6),
            "arrival_mono": arrival_mono,
            "first_token_mono": stream.first_mono if stream else None,
            "last_token_mono": stream.last_mono if stream else None,
            "tokens_sent": stream.sent if stream else 0,
            "prompt_tokens": prompt_tokens,
            "cached_tokens": cached,
            "outcome": outcome,
            "fault": fault.spec if fault else None,
            "image_tokens": image_tokens,
            "reply": reply,
        }
        if session is not None:  # a router's session-affinity header, as llmload sends it (issue 23)
            entry["session"] = session
        if traceparent is not None:  # W3C trace context (--trace-context): an engine that traces joins on it
            entry["traceparent"] = traceparent
        if self.config.log_tokens:
            # perf_counter (CLOCK_MONOTONIC) when each token's frame was handed to the socket; a
            # streamed request's true gaps are the differences. None when no stream was served.
            entry["token_mono"] = stream.token_monos if stream and stream.req.stream else None
        self._log.add(entry)
