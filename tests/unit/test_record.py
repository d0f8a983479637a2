"""Metric derivation and the status taxonomy, on recorded streams with known timestamps."""

from __future__ import annotations

import pytest

from llmload.metrics.record import CSV_COLUMNS, RequestMeta, StreamAccumulator, failed_record, status_for_http
from llmload.wire.chunks import classify_event
from llmload.wire.sse import SSEDecoder
from tests.support import recorded_streams as rs


def run(body: bytes, end_state: str = "complete", t0: float = 0.0, gap_s: float = 0.010, want_text=False):
    """Event i arrives at t0 + (i+1)*gap."""
    acc = StreamAccumulator(t0, want_text)
    d = SSEDecoder()
    evs = d.feed(body) + (d.flush() if end_state == "complete" else [])
    t = t0
    for ev in evs:
        t += gap_s
        acc.add(classify_event(ev, want_text), t)
    return acc.finish(RequestMeta("r", 1.0, "s", max_tokens=16), end_state, t + 0.001)


def test_role_only_chunk_is_not_the_first_token():
    rec = run(rs.VLLM_CHAT)
    assert rec.status == "ok"
    assert rec.ttft_ms == pytest.approx(20.0)  # event 2 is the first content, not event 1 (role)
    assert rec.e2e_ms == pytest.approx(60.0)  # [DONE] at event 6
    assert rec.completion_tokens == 4 and rec.token_source == "usage"
    assert rec.tpot_ms == pytest.approx((60.0 - 20.0) / 3)
    assert rec.itl_ms == pytest.approx([10.0, 10.0]) and rec.itl_max_ms == pytest.approx(10.0)
    assert rec.prompt_tokens == 5 and rec.cached_tokens == 0 and rec.finish_reason == "stop"


def test_reasoning_counts_for_ttft_and_visible_ttft_waits_for_content():
    rec = run(rs.VLLM_REASONING)
    assert rec.ttft_ms == pytest.approx(20.0)
    assert rec.ttft_visible_ms == pytest.approx(40.0)
    assert rec.status == "ok" and rec.token_source == "chunks" and rec.completion_tokens == 3


def test_multi_token_chunks_use_usage_for_tpot():
    rec = run(rs.VLLM_CONTINUOUS_USAGE)
    assert rec.completion_tokens == 4 and rec.token_source == "usage"
    assert rec.tpot_ms == pytest.approx((30.0 - 10.0) / 3)
    assert len(rec.itl_ms) == 1


def test_missing_usage_falls_back_to_chunk_count():
    rec = run(rs.TGI_CHAT)
    assert rec.token_source == "chunks" and rec.completion_tokens == 2 and rec.status == "ok"
    assert rec.finish_reason == "eos_token"


def test_tool_calls_are_output():
    rec = run(rs.OPENAI_TOOL_CALLS)
    assert rec.ttft_ms == pytest.approx(10.0) and rec.ttft_visible_ms is None
    assert rec.completion_tokens == 9 and rec.cached_tokens == 16 and rec.status == "ok"


def test_text_is_kept_when_asked():
    assert run(rs.VLLM_CHAT, want_text=True).text == 'Hello "world"!'
    assert run(rs.VLLM_CHAT).text == ""


def test_stream_without_done_or_finish_reason_is_truncated():
    body = rs.VLLM_CHAT.split(b'"finish_reason":"stop"')[0]
    rec = run(body, end_state="eof")
    assert rec.status == "truncated" and rec.error
    rec = run(body.rsplit(b"data:", 1)[0], end_state="complete")
    assert rec.status == "truncated"
    assert run(body, end_state="complete").status == "protocol_error"  # the server ended mid-event


def test_finish_reason_without_done_is_ok():
    rec = run(rs.VLLM_CHAT.replace(b"data: [DONE]\n\n", b""), end_state="eof")
    assert rec.status == "ok"


def test_error_object_malformed_timeout_empty_cancelled():
    assert run(rs.VLLM_STREAM_ERROR).status == "stream_error"
    assert run(rs.VLLM_STREAM_ERROR).error == "engine died"
    malformed = rs.VLLM_CHAT.replace(b'"content":"Hello"},"logprobs":null,"finish_reason":null}]}',
                                     b'"content":"Hello"},"logprobs":null,"finish_reason":null', 1)
    assert run(malformed).status == "protocol_error"
    assert run(rs.VLLM_CHAT[:300], end_state="timeout").status == "timeout"
    empty = (b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
             b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    assert run(empty).status == "empty"
    assert run(rs.VLLM_CHAT[:300], end_state="cancelled").status == "cancelled"
    assert run(rs.VLLM_CHAT, end_state="connect_error").status == "connect_error"


def test_http_statuses_and_row_shape():
    assert [status_for_http(c) for c in (429, 400, 404, 500, 503)] == \
        ["rate_limited", "http_4xx", "http_4xx", "http_5xx", "http_5xx"]
    rec = failed_record(RequestMeta("x", 2.0, "chat", max_tokens=8, users=3, worker=1), "rate_limited", "slow",
                        http_status=429)
    row = rec.row()
    assert len(row) == len(CSV_COLUMNS)
    d = dict(zip(CSV_COLUMNS, row, strict=True))
    assert d["status"] == "rate_limited" and d["http_status"] == 429 and d["ttft_ms"] is None
    assert d["users"] == 3 and d["worker"] == 1 and d["max_tokens"] == 8
    assert CSV_COLUMNS == (
        "request_id", "start_time", "scenario", "status", "http_status", "ttft_ms", "ttft_visible_ms", "tpot_ms",
        "e2e_ms", "itl_max_ms", "prompt_tokens", "cached_tokens", "completion_tokens", "max_tokens",
        "token_source", "finish_reason", "users", "worker", "session_id", "turn", "error", "scheduled_time",
        "requested_input_tokens", "arrival_rate", "run_id", "coalesced_reads", "step_kind",
        "requested_image_tokens", "backoff_ms", "call_id", "call_after", "trace_id", "phase", "inputs",
        "model", "priority", "audio_seconds", "resent_input_tokens")


def test_e2e_of_a_failed_request_runs_to_the_moment_it_failed():
    """Events at 10, 20, 30 ms after t0 = 0; then nothing. Timed out at 530 ms (500 ms without
    progress), cut off by the server at 75 ms, cancelled at the end of the test at 90 ms: E2E is
    those moments, not the 30 ms of the last event. A stream that ended well ends at its last event."""
    cut = rs.VLLM_CHAT.split(b'"finish_reason":"stop"')[0].rsplit(b"data:", 1)[0]

    def finish(end_state: str, t_end: float):
        acc = StreamAccumulator(0.0)
        d = SSEDecoder()
        for i, ev in enumerate(d.feed(cut)):
            acc.add(classify_event(ev, False), (i + 1) * 0.010)
        return acc.finish(RequestMeta("r", 1.0, "s"), end_state, t_end)

    assert finish("timeout", 0.530).status == "timeout" and finish("timeout", 0.530).e2e_ms == pytest.approx(530.0)
    eof = finish("eof", 0.075)
    assert eof.status == "truncated" and eof.e2e_ms == pytest.approx(75.0)
    assert finish("cancelled", 0.090).e2e_ms == pytest.approx(90.0)
    ok = run(rs.VLLM_CHAT)  # [DONE] at 60 ms, finished at 61 ms
    assert ok.status == "ok" and ok.e2e_ms == pytest.approx(60.0)
