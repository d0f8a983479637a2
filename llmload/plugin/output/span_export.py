"""Every request as an OpenTelemetry client span (``--otlp-endpoint URL``, the ``otel`` extra), sent
over OTLP/HTTP from each process that runs users (local, or every worker).

A span is made from the request's record once it has ended (:meth:`SpanExport.export`, called by
the plugin's ``record``): its start is the row's ``start_time`` (t0), its end t0 + E2E, so nothing
is added to the per-token path. Spans go through a ``BatchSpanProcessor`` (batches of
``BATCH_SPANS``, at least every ``SCHEDULE_S``) and are flushed at the end of each test (bounded by
``FLUSH_S``). Attributes follow OpenTelemetry's GenAI semantic conventions (client inference
spans, ``docs/gen-ai/gen-ai-spans.md`` of open-telemetry/semantic-conventions, commit 7b0c0fe),
plus llmload's own numbers under ``llmload.`` (every per-request metric of the catalog, in ms).
With ``--trace-context`` the span's trace id and span id are the ``traceparent`` the request
carried, so the server's spans (vLLM's ``--otlp-traces-endpoint``) are its children; otherwise
each request is a trace of its own.

Usage::

    check_span_options(environment)                         # at init: ConfigError naming the flag
    spans = SpanExport("http://collector:4318", ["x-team=a"], run_identity)
    spans.describe("chat", "chat", "llama-3-8b", "http://10.0.0.5:8000")   # a user's scenario, at its start
    spans.export(record)                                    # every finished request
    spans.flush()                                           # at the end of a test
    span_attributes(record, "chat", "llama-3-8b", "http://10.0.0.5:8000")   # the pure part
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from llmload.metrics import catalog
from llmload.metrics.record import OK, RequestRecord
from llmload.plugin.options.flags import option
from llmload.plugin.options.option_checks import ConfigError
from llmload.wire.endpoints import ENDPOINTS, STREAM, UPLOAD, known
from llmload.wire.endpoints import endpoint as endpoint_of
from llmload.wire.protocol import ENV_PREFIX
from llmload.wire.redact import is_secret_name

log = logging.getLogger("llmload")

EXTRA_HINT = "pip install 'llmload[otel]'"
TRACES_PATH = "/v1/traces"  # OTLP/HTTP's path, added to an endpoint given without one
# Spans per export. The SDK encodes a whole batch in one go, holding the event loop meanwhile (~0.1 ms
# a span, benchmarks/span_export.py): 128 held it 15 ms; 16 keep it near 2 ms, at one POST per 16 requests.
BATCH_SPANS = 16
QUEUE_SPANS = 16384  # spans waiting for export before the SDK drops one (a burst of ends at a step's change)
SCHEDULE_S = 1.0
FLUSH_S = 10.0
EXPORT_TIMEOUT_S = 5.0  # one export, its retries included; a collector that fails is then left alone (span_sdk)
# gen_ai.operation.name and gen_ai.provider.name: each endpoint's, in llmload.wire.endpoints
_STEP_ENDPOINTS = {"embed": "embeddings", "rerank": "rerank"}  # a pipeline's whole-body steps, by row step_kind


def otlp_headers(texts: Iterable[str]) -> dict[str, str]:
    """``--otlp-header NAME=VALUE`` (``VALUE`` may be ``env:VAR``); a secret-named header must come
    from the environment: Locust ships options to workers in clear."""
    out = {}
    for text in texts:
        name, sep, value = str(text).partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ConfigError(f"--otlp-header {text!r}: expected NAME=VALUE, e.g. x-scope-orgid=load-tests")
        if value.startswith(ENV_PREFIX):
            var = value[len(ENV_PREFIX):]
            if var not in os.environ:
                raise ConfigError(f"--otlp-header {name}=env:{var}: {var} is not set in this process's environment")
            value = os.environ[var]
        elif is_secret_name(name):
            raise ConfigError(f"--otlp-header {name}=...: a secret's value is given as env:VAR ({name}=env:VAR, "
                              "VAR set on every host): options travel to workers in clear")
        out[name] = value
    return out


def traces_url(endpoint: str) -> str:
    """The collector's URL as given, or with ``/v1/traces`` when it names no path."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--otlp-endpoint {endpoint!r}: expected an OTLP/HTTP URL, e.g. http://collector:4318 "
                          "(or its full traces URL, .../v1/traces)")
    return endpoint.rstrip("/") + TRACES_PATH if parts.path in ("", "/") else endpoint


def check_span_options(environment: Any) -> None:
    """At init: the URL, the headers, and the SDK installed (else one line naming the extra)."""
    endpoint = option(environment, "otlp_endpoint")
    headers = option(environment, "otlp_header", []) or []
    if headers and not endpoint:
        raise ConfigError("--otlp-header needs --otlp-endpoint URL: where the spans go")
    if not endpoint:
        return
    traces_url(endpoint)
    otlp_headers(headers)
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ConfigError(f"--otlp-endpoint needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
                          f"{EXTRA_HINT}") from None


def span_attributes(rec: RequestRecord, endpoint: str, model: str, host: str, run_id: str = "") -> dict[str, Any]:
    """The span's attributes (GenAI conventions, then ``llmload.*``); None values left out."""
    m = rec.meta
    server = urlsplit(host) if host else None
    ep = endpoint_of(endpoint) if known(endpoint) else None
    # a stream, or an upload whose answer streamed (it has a TTFT)
    streamed = ep is not None and (ep.answer == STREAM or (ep.answer == UPLOAD and rec.ttft_ms is not None))
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": ep.operation if ep is not None else endpoint,
        "gen_ai.provider.name": ep.provider if ep is not None else "openai",
        "gen_ai.request.model": m.model or model or None,
        "gen_ai.request.max_tokens": m.max_tokens,
        "gen_ai.request.stream": streamed,
        "gen_ai.usage.input_tokens": rec.prompt_tokens,
        "gen_ai.usage.output_tokens": rec.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": rec.cached_tokens,
        "gen_ai.response.finish_reasons": (rec.finish_reason,) if rec.finish_reason else None,
        "gen_ai.response.time_to_first_chunk": None if rec.ttft_ms is None else rec.ttft_ms / 1000.0,
        "gen_ai.conversation.id": m.session_id or None,
        "server.address": server.hostname if server else None,
        "server.port": (server.port or (443 if server.scheme == "https" else 80)) if server else None,
        "error.type": None if rec.status == OK else rec.status,  # llmload's status taxonomy (docs/metrics.md)
        "http.response.status_code": rec.http_status,
        "llmload.request_id": m.request_id,
        "llmload.scenario": m.scenario,
        "llmload.status": rec.status,
        "llmload.worker": m.worker,
        "llmload.run_id": m.run_id or run_id or None,  # a row gets it when written, the span now
    }
    for metric in catalog.ROW_METRICS:  # every per-request metric, named as its CSV column (ttft_ms, ...)
        attrs["llmload." + metric.row_column] = getattr(rec, metric.row_column, None)
    return {k: v for k, v in attrs.items() if v is not None}


def told_by(meta: Any) -> str:
    """The endpoint a record's own fields tell (the first whose row fields it fills), else chat."""
    for e in ENDPOINTS:
        if e.row_fields and all(getattr(meta, f, None) is not None for f in e.row_fields):
            return e.name
    return "chat"


class SpanExport:
    """The process's exporter (its own TracerProvider: Locust's ``--otel`` keeps the global one)."""

    def __init__(self, endpoint: str, header_texts: Iterable[str], run: Any, span_exporter: Any = None) -> None:
        """``span_exporter``: instead of OTLP/HTTP through a batch processor, this SDK exporter, span by
        span (a test's in-memory one)."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        from llmload import __version__
        from llmload.plugin.output.span_sdk import GuardedExporter, PresetIds

        self._ids = PresetIds()
        self.guard: Any = None  # the OTLP exporter's guard: spans sent and dropped
        self.provider = TracerProvider(resource=Resource.create({"service.name": "llmload",
                                                                 "service.version": __version__}),
                                       id_generator=self._ids)
        if span_exporter is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        else:
            url = traces_url(endpoint)
            self.guard = GuardedExporter(OTLPSpanExporter(endpoint=url, headers=otlp_headers(header_texts),
                                                          timeout=EXPORT_TIMEOUT_S), url)
            exporter = self.guard
            self.provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=QUEUE_SPANS,
                                                                max_export_batch_size=BATCH_SPANS,
                                                                schedule_delay_millis=int(SCHEDULE_S * 1000)))
        self.tracer = self.provider.get_tracer("llmload", __version__)
        from opentelemetry.context import Context
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._otel = (Context, SpanKind, Status, StatusCode)  # looked up once, not per request
        self.run = run
        # (scenario, step kind) → (endpoint, model, host); a RAG pipeline's steps differ within its scenario
        self.described: dict[tuple[str, str], tuple[str, str, str]] = {}
        self.exported = 0

    def describe(self, scenario: str, endpoint: str, model: str, host: str, step_kind: str = "") -> None:
        """What a scenario's requests are (a user tells it at its start: the record does not carry it);
        ``step_kind``: one step of a RAG pipeline (its rows' ``step_kind``: embed, rerank, chat)."""
        self.described[(scenario, step_kind)] = (endpoint, model, host or "")

    def describe_whole_body(self, spec: Any, model: str, host: str, chat_endpoint: str) -> None:
        """An ``endpoint: embeddings|rerank|score`` workload, or each step of a RAG pipeline."""
        pipe = spec.pipeline
        if pipe is None:
            self.describe(spec.name, spec.endpoint, model, host)
            return
        for kind, endpoint, named in (("embed", "embeddings", pipe.embed_model or model),
                                      ("rerank", pipe.rerank_api, pipe.rerank_model or model),
                                      ("chat", chat_endpoint, model)):
            self.describe(spec.name, endpoint, named, host, kind)

    def export(self, rec: RequestRecord) -> None:
        Context, SpanKind, Status, StatusCode = self._otel  # noqa: N806 (the SDK's classes)
        m = rec.meta
        described = self.described.get((m.scenario, m.step_kind)) or self.described.get((m.scenario, ""))
        if described is None:  # a user class that does not describe its scenario: what the record tells
            described = (_STEP_ENDPOINTS.get(m.step_kind) or told_by(m), "", "")
        endpoint, model, host = described
        attrs = span_attributes(rec, endpoint, model, host, self.run.run_id)
        start_ns = int(m.start_time * 1e9)
        end_ns = start_ns + int((rec.e2e_ms or 0.0) * 1e6)
        name = f"{attrs['gen_ai.operation.name']} {attrs.get('gen_ai.request.model', '')}".strip()
        self._ids.preset(m.trace_id, m.span_id)  # --trace-context: the traceparent's ids ('' : fresh ones)
        try:
            span = self.tracer.start_span(name, context=Context(), kind=SpanKind.CLIENT, attributes=attrs,
                                          start_time=start_ns)
        finally:
            self._ids.preset("", "")
        if rec.status != OK:
            span.set_status(Status(StatusCode.ERROR, rec.error or rec.status))
        span.end(end_time=end_ns)
        self.exported += 1

    def flush(self) -> None:
        """Send what is queued (at the end of a test), waiting at most FLUSH_S; say what was dropped."""
        self.provider.force_flush(timeout_millis=int(FLUSH_S * 1000))
        guard = self.guard
        if guard is not None and guard.dropped:
            log.warning("llmload: --otlp-endpoint %s: %d span(s) sent, %d dropped (the collector did not take "
                        "them)", guard.where, guard.sent, guard.dropped)
