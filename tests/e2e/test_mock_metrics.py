"""`llmload mock --metrics-format vllm|sglang|tgi`: each engine's names, counted on its clock, and
each read back through llmload's own mapping (so every mapping runs end to end)."""

from __future__ import annotations

import http.client

import pytest

from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, EngineRequest
from llmload.mock.engine.metrics_state import METRIC_FORMATS, EngineStats
from llmload.mock.telemetry.prometheus import render_metrics
from llmload.server_metrics import aggregate_step, detect_engine, parse_exposition, snapshot
from tests.support.engine_runs import run_until_idle, words
from tests.support.mock_client import chat, post

# 3 requests of 100 + 50 tokens fit the cache; the other 2 wait for memory, not for a slot
KV = EngineParams(max_num_seqs=64, max_num_batched_tokens=4096, kv_capacity_tokens=460, step_base_ms=10.0,
                  step_per_seq_ms=1.0, step_per_prefill_token_ms=0.0, prefix_caching=True, chunked_prefill=True)


def kv_limited(fmt: str) -> BatchingEngine:
    e = BatchingEngine(KV)
    e.stats = EngineStats(fmt, KV.max_model_len)
    for i in range(5):
        e.submit(EngineRequest(prompt_words=words(100, f"r{i}"), output_tokens=50), now=0.0)
    e.advance(0.0)                 # admits 3, starts their prefill
    for _ in range(3):             # prefill, then two decode steps
        e.advance(e.next_event_time())
    return e


@pytest.mark.parametrize("fmt", METRIC_FORMATS)
def test_each_format_is_its_engine_and_reads_back_the_engine_state(fmt):
    e = kv_limited(fmt)
    assert (e.num_running, e.num_waiting, e.kv_used) == (3, 2, 450)
    exposition = parse_exposition(render_metrics(e, "m", {"completed": 0}), source=f"mock {fmt}")
    assert detect_engine(exposition) == fmt
    snap = snapshot(exposition)
    assert snap.engine == fmt
    assert snap.gauges["requests_running"] == 3 and snap.gauges["requests_waiting"] == 2
    assert snap.gauges["kv_cache_usage"] == pytest.approx(450 / 460)  # TGI: reserved ÷ budget
    # token counters on each engine's clock: vLLM counts as it goes (prompts at admission), SGLang when
    # a request ends, TGI its input at validation and its output when a request ends
    prompt, generated = {"vllm": (300, 9), "sglang": (0, 0), "tgi": (500, 0)}[fmt]
    assert snap.counters["prompt_tokens"] == prompt and snap.counters["generation_tokens"] == generated
    assert snap.counters.get("preemptions", 0) == 0
    assert ("server_ttft_seconds" in snap.histograms) == (fmt != "tgi")  # TGI has no TTFT histogram


@pytest.mark.parametrize("fmt", METRIC_FORMATS)
def test_after_the_run_every_format_counts_the_same_tokens_and_requests(fmt):
    e = kv_limited(fmt)
    t0 = snapshot(parse_exposition(render_metrics(e, "m", {})))
    run_until_idle(e, e._now)
    t1 = snapshot(parse_exposition(render_metrics(e, "m", {})))
    assert t1.counters["prompt_tokens"] == 500 and t1.counters["generation_tokens"] == 250
    assert t1.gauges["requests_running"] == 0 and t1.gauges["kv_cache_usage"] == 0
    e2e = t1.histograms["server_e2e_seconds"]
    assert e2e.count == 5
    stats = aggregate_step([(0.0, t0), (10.0, t1)], 0.0, 10.0)
    assert stats.queue_time_ms is not None and stats.queue_time_ms["p95"] > 100  # two waited a whole request
    if fmt == "tgi":  # a per-request mean time per token (TGI's), 11 to 13 ms a step here
        assert t1.histograms["server_itl_seconds"].count == 5
    else:             # a per-token inter-token latency (vLLM's and SGLang's)
        assert t1.histograms["server_itl_seconds"].count == 5 * 49


def test_sglang_cached_tokens_appear_at_the_first_hit():
    e = BatchingEngine(KV)
    e.stats = EngineStats("sglang")
    system = words(64, "sys")
    e.submit(EngineRequest(prompt_words=system + words(8, "a"), output_tokens=2), now=0.0)
    run_until_idle(e)
    assert "sglang:cached_tokens_total" not in render_metrics(e, "m", {})
    e.submit(EngineRequest(prompt_words=system + words(8, "b"), output_tokens=2), now=e._now + 1)
    run_until_idle(e, e._now + 1)
    snap = snapshot(parse_exposition(render_metrics(e, "m", {})))
    assert snap.counters["prefix_cache_hits_tokens"] == 64 and snap.counters["prefix_cache_queries_tokens"] == 144


def test_a_bad_format_is_refused():
    with pytest.raises(ValueError, match="metrics format 'trtllm': expected one of vllm, sglang, tgi"):
        EngineStats("trtllm")


@pytest.mark.parametrize("fmt", METRIC_FORMATS)
def test_mock_serves_each_format_over_http(mock_factory, fmt):
    m = mock_factory("--profile", "kv-limited", "--metrics-format", fmt)
    for q in ("a", "b"):
        status, _, _ = post(m, "/v1/chat/completions", chat(max_tokens=5, messages=[
            {"role": "user", "content": f"question {q} " + "word " * 30}]))
        assert status == 200
    conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=10)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    body = resp.read()
    assert resp.status == 200 and resp.getheader("content-type").startswith("text/plain; version=0.0.4")
    exposition = parse_exposition(body, source=f"{m.url}/metrics")
    snap = snapshot(exposition)
    assert snap.engine == fmt
    assert snap.counters["generation_tokens"] == 10
    assert snap.gauges["requests_running"] == 0 and snap.gauges["kv_cache_usage"] == 0
    assert any(name.startswith("llmload_mock:event_lag_seconds") for name in exposition.names())
