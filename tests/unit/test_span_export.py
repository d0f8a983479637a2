"""OTLP span export (issue 22): a record's GenAI attributes, the options' checks, a clear error
without the otel extra, and spans carrying the traceparent's ids (through the SDK, no network)."""

from __future__ import annotations

import sys
import types

import pytest

from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.plugin.options.option_checks import ConfigError
from llmload.plugin.output.span_export import check_span_options, otlp_headers, span_attributes, traces_url


def _rec(**kw) -> RequestRecord:
    meta = RequestMeta("w0abc-1", 1700000000.5, "chat", max_tokens=64, users=4, session_id="s1")
    base = dict(status="ok", http_status=200, ttft_ms=120.0, tpot_ms=8.5, e2e_ms=655.5, itl_max_ms=20.0,
                prompt_tokens=300, cached_tokens=128, completion_tokens=64, finish_reason="length")
    return RequestRecord(meta=meta, **{**base, **kw})


def _env(**opts) -> types.SimpleNamespace:
    return types.SimpleNamespace(parsed_options=types.SimpleNamespace(**{"otlp_endpoint": "", "otlp_header": [],
                                                                         **opts}))


def test_a_requests_span_attributes_follow_the_genai_conventions():
    a = span_attributes(_rec(), "chat", "llama-3-8b", "http://10.0.0.5:8000", run_id="20261201T000000Z-abc")
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "llama-3-8b" and a["gen_ai.request.max_tokens"] == 64
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
            a["gen_ai.usage.cache_read.input_tokens"]) == (300, 64, 128)
    assert a["gen_ai.response.finish_reasons"] == ("length",) and a["gen_ai.response.time_to_first_chunk"] == 0.12
    assert (a["server.address"], a["server.port"]) == ("10.0.0.5", 8000) and a["gen_ai.conversation.id"] == "s1"
    assert (a["llmload.ttft_ms"], a["llmload.tpot_ms"], a["llmload.e2e_ms"]) == (120.0, 8.5, 655.5)
    assert a["llmload.run_id"] == "20261201T000000Z-abc" and a["llmload.status"] == "ok"
    assert "error.type" not in a and all(v is not None for v in a.values())


def test_a_failed_request_names_its_error_and_other_endpoints_their_operation():
    a = span_attributes(_rec(status="http_5xx", http_status=503, ttft_ms=None, completion_tokens=None,
                             finish_reason=""), "completions", "", "https://api.example.com")
    assert a["error.type"] == "http_5xx" and a["http.response.status_code"] == 503
    assert a["gen_ai.operation.name"] == "text_completion" and "gen_ai.request.model" not in a
    assert a["server.port"] == 443 and "gen_ai.response.finish_reasons" not in a
    assert span_attributes(_rec(), "messages", "claude", "")["gen_ai.provider.name"] == "anthropic"
    m = _rec()
    m.meta.model = "lora-a"  # a models: mix names each request's model
    assert span_attributes(m, "chat", "base", "")["gen_ai.request.model"] == "lora-a"


def test_span_options_are_checked_with_the_flag_named(monkeypatch):
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("http://c:4318/otlp/v1/traces") == "http://c:4318/otlp/v1/traces"
    monkeypatch.setenv("OTLP_TOKEN", "t0ken")
    assert otlp_headers(["x-scope-orgid = load", "Authorization=env:OTLP_TOKEN"]) == {
        "x-scope-orgid": "load", "Authorization": "t0ken"}
    for call, message in ((lambda: traces_url("collector:4318"), "--otlp-endpoint 'collector:4318': expected"),
                          (lambda: otlp_headers(["novalue"]), "--otlp-header 'novalue': expected NAME=VALUE"),
                          (lambda: otlp_headers(["api-key=abc"]), "--otlp-header api-key=...: a secret's value"),
                          (lambda: otlp_headers(["x=env:NOT_SET_ANYWHERE_42"]), "--otlp-header x=env:NOT_SET"),
                          (lambda: check_span_options(_env(otlp_header=["a=b"])), "--otlp-header needs")):
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value).startswith(message), str(e.value)
    check_span_options(_env())  # nothing asked: nothing checked


def test_without_the_otel_extra_the_endpoint_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed: import fails
    with pytest.raises(ConfigError) as e:
        check_span_options(_env(otlp_endpoint="http://127.0.0.1:4318"))
    assert "pip install 'llmload[otel]'" in str(e.value) and str(e.value).startswith("--otlp-endpoint needs")


def test_a_span_carries_the_traceparents_ids_or_fresh_ones():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from llmload.plugin.output.span_export import SpanExport

    memory = InMemorySpanExporter()  # the real export path, span by span into memory: no network
    spans = SpanExport("http://127.0.0.1:4318", [], types.SimpleNamespace(run_id="r1"), span_exporter=memory)
    spans.describe("chat", "chat", "m", "http://127.0.0.1:8000")
    traced = _rec()
    traced.meta.trace_id, traced.meta.span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    spans.export(traced)
    spans.export(_rec(status="timeout"))
    batch = _rec()
    batch.meta.scenario, batch.meta.inputs = "embed", 8  # an undescribed scenario: the record says embeddings
    spans.export(batch)
    first, second, third = memory.get_finished_spans()
    assert third.attributes["gen_ai.operation.name"] == "embeddings" and not third.attributes["gen_ai.request.stream"]
    assert f"{first.context.trace_id:032x}" == traced.meta.trace_id and f"{first.context.span_id:016x}" == \
        traced.meta.span_id and first.parent is None
    assert first.name == "chat m" and first.kind.name == "CLIENT"
    assert first.start_time == int(1700000000.5 * 1e9) and first.end_time - first.start_time == int(655.5 * 1e6)
    assert second.context.trace_id not in (0, first.context.trace_id) and second.status.status_code.name == "ERROR"
    assert second.attributes["error.type"] == "timeout" and second.attributes["llmload.run_id"] == "r1"


def test_a_collector_that_fails_is_left_alone_for_a_while_and_its_drops_are_counted(monkeypatch):
    from opentelemetry.sdk.trace.export import SpanExportResult

    from llmload.plugin.output import span_sdk
    from llmload.plugin.output.span_sdk import GuardedExporter

    answers, calls = [SpanExportResult.FAILURE, SpanExportResult.SUCCESS], []

    class Inner:
        def export(self, spans):
            calls.append(len(spans))
            return answers.pop(0)

    clock = [100.0]
    monkeypatch.setattr(span_sdk.time, "monotonic", lambda: clock[0])
    guard = GuardedExporter(Inner(), "http://c:4318/v1/traces", quiet_s=30.0)
    assert guard.export([1, 2]) == SpanExportResult.FAILURE  # the collector failed: one try ...
    clock[0] = 120.0
    assert guard.export([3, 4, 5]) == SpanExportResult.FAILURE and calls == [2]  # ... then left alone for 30 s
    clock[0] = 131.0
    assert guard.export([6]) == SpanExportResult.SUCCESS and calls == [2, 1]  # tried again: it answers
    assert (guard.sent, guard.dropped) == (1, 5)


def test_each_step_of_a_rag_pipeline_and_each_whole_body_workload_names_its_own_operation():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from llmload.plugin.output.span_export import SpanExport

    memory = InMemorySpanExporter()
    spans = SpanExport("http://127.0.0.1:4318", [], types.SimpleNamespace(run_id="r1"), span_exporter=memory)
    pipe = types.SimpleNamespace(embed_model="e5", rerank_model="bge", rerank_api="score")
    spans.describe_whole_body(types.SimpleNamespace(name="rag", pipeline=pipe), "llama", "http://127.0.0.1:8000",
                              "chat")
    spans.describe_whole_body(types.SimpleNamespace(name="rank", pipeline=None, endpoint="rerank"), "bge",
                              "http://127.0.0.1:9000", "chat")
    for scenario, kind, inputs in (("rag", "embed", 1), ("rag", "rerank", 8), ("rag", "chat", None),
                                   ("rank", "", 8)):
        rec = _rec()
        rec.meta.scenario, rec.meta.step_kind, rec.meta.inputs = scenario, kind, inputs
        spans.export(rec)
    got = [(s.attributes["gen_ai.operation.name"], s.attributes["gen_ai.request.model"], s.attributes["server.port"])
           for s in memory.get_finished_spans()]
    assert got == [("embeddings", "e5", 8000), ("score", "bge", 8000), ("chat", "llama", 8000),
                   ("rerank", "bge", 9000)]
    audio = _rec(ttft_ms=300.0)
    audio.meta.scenario, audio.meta.audio_seconds = "transcribe", 12.0
    assert span_attributes(audio, "audio", "whisper", "")["gen_ai.request.stream"] is True
    assert span_attributes(_rec(ttft_ms=None), "audio", "whisper", "")["gen_ai.request.stream"] is False
