"""llmload.plugin.output.prometheus_export: the rows become GenAI-named histograms and counters, read back
with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from llmload.metrics.record import CSV_COLUMNS
from llmload.plugin.output.prometheus_export import LLMLoadMetrics


def _row(**cells) -> tuple:
    base = {c: None for c in CSV_COLUMNS} | {"scenario": "chat", "status": "ok", "ttft_ms": 120.0, "tpot_ms": 20.0,
                                             "e2e_ms": 1100.0, "itl_max_ms": 40.0, "prompt_tokens": 100,
                                             "completion_tokens": 50}
    base |= cells
    return tuple(base[c] for c in CSV_COLUMNS)


def _samples(body: bytes) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}


def test_rows_become_histograms_counters_and_gauges():
    state = {"users": 8, "in_flight": {"chat": 3}, "health": [{"cpu": 40.0, "limited": False},
                                                             {"cpu": 95.0, "limited": True}]}
    m = LLMLoadMetrics(model_of=lambda: "qwen", state=lambda: state)
    m.add_rows([_row(), _row(e2e_ms=3000.0), _row(scenario="rag", completion_tokens=10),
                _row(status="http_error", e2e_ms=5.0, ttft_ms=None, tpot_ms=None, completion_tokens=None)])
    s = _samples(m.exposition())
    chat, rag = ("gen_ai_request_model", "qwen"), ("gen_ai_request_model", "qwen")
    ok = (("error_type", ""), chat, ("scenario", "chat"))
    assert s[("gen_ai_client_operation_duration_seconds_count", ok)] == 2
    assert s[("gen_ai_client_operation_duration_seconds_bucket", (("error_type", ""), chat, ("le", "1.28"),
                                                                  ("scenario", "chat")))] == 1
    assert s[("gen_ai_client_operation_duration_seconds_sum", ok)] == 4.1
    assert s[("gen_ai_client_operation_duration_seconds_count", (("error_type", "http_error"), chat,
                                                                 ("scenario", "chat")))] == 1
    assert s[("gen_ai_client_operation_time_to_first_chunk_seconds_count", (chat, ("scenario", "chat")))] == 2
    assert s[("llmload_client_time_per_output_token_seconds_sum", (chat, ("scenario", "chat")))] == 0.04
    assert s[("gen_ai_client_token_usage_sum", (chat, ("gen_ai_token_type", "output"), ("scenario", "rag")))] == 10
    assert s[("llmload_requests_total", (chat, ("scenario", "chat"), ("status", "http_error")))] == 1
    assert s[("llmload_tokens_total", (chat, ("gen_ai_token_type", "input"), ("scenario", "chat")))] == 200
    assert s[("llmload_requests_in_flight", (rag, ("scenario", "chat")))] == 3
    assert s[("llmload_running_users", ())] == 8 and s[("llmload_client_limited", ())] == 1
    assert s[("llmload_client_cpu_percent_max", ())] == 95
