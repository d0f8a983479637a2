"""OTLP span export (issue 22) against a local OTLP/HTTP receiver: every row of a real Locust run is
one client span, its attributes are the row's numbers, and with --trace-context its ids are the
traceparent the server saw; the workers of a distributed run export and flush theirs too."""

from __future__ import annotations

import json

from tests.support.locust_runs import CHAT, load_rows, run_locust
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.processes import free_port

SPAN_KIND_CLIENT = 3  # opentelemetry.proto.trace.v1.Span.SpanKind
STATUS_ERROR = 2


def _spans_and_rows(mock, tmp_path, name: str, *args: str):
    prefix = tmp_path / name
    with OtlpReceiver() as rx:
        res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-t", "3s", "--csv", str(prefix),
                          "--output-tokens", "8", "--otlp-endpoint", rx.url, *args], tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        rows = load_rows(prefix)
        spans = rx.wait_for(len(rows), timeout=20)  # flushed before the process ended: there already
    manifest = json.loads((tmp_path / f"{name}_run.json").read_text())
    return spans, rows, manifest


def test_every_row_is_one_span_with_its_numbers_and_the_traceparents_ids(fixed_mock, tmp_path):
    spans, rows, manifest = _spans_and_rows(fixed_mock, tmp_path, "traced", "-u", "3", "-r", "3",
                                            "--stop-timeout", "10", "--trace-context")
    assert len(rows) >= 10 and len(spans) == len(rows)
    by_id = {s["attributes"]["llmload.request_id"]: s for s in spans}
    assert set(by_id) == set(rows["request_id"])
    log = fixed_mock.log_by_id(expect=len(rows))
    for r in rows.itertuples():
        s, a = by_id[r.request_id], by_id[r.request_id]["attributes"]
        assert s["trace_id"] == r.trace_id and s["parent_span_id"] == ""  # the client span is the trace's root
        assert log[r.request_id]["traceparent"].split("-")[2] == s["span_id"]  # the server's parent: this span
        assert s["kind"] == SPAN_KIND_CLIENT and s["name"] == f"chat {manifest['model']}"
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == manifest["model"]
        assert a["llmload.status"] == r.status and a["llmload.run_id"] == r.run_id
        assert abs(s["start_ns"] / 1e9 - r.start_time) < 1e-5
        if r.status == "ok":
            assert a["gen_ai.usage.output_tokens"] == r.completion_tokens
            assert a["gen_ai.usage.input_tokens"] == r.prompt_tokens
            assert abs((s["end_ns"] - s["start_ns"]) / 1e6 - r.e2e_ms) < 0.01
            assert abs(a["llmload.ttft_ms"] - r.ttft_ms) < 0.01 and a["gen_ai.response.finish_reasons"] == (
                r.finish_reason,)
            assert a["server.address"] == "127.0.0.1" and a["server.port"] == fixed_mock.port
        else:
            assert a["error.type"] == r.status and s["status"] == STATUS_ERROR
    assert spans[0]["resource"]["service.name"] == "llmload"


def test_without_trace_context_each_request_is_its_own_trace_and_workers_export_theirs(fixed_mock, tmp_path):
    port = str(free_port())
    spans, rows, _ = _spans_and_rows(fixed_mock, tmp_path, "procs", "-u", "4", "-r", "4", "--processes", "2",
                                     "--master-bind-port", port, "--master-port", port, "--stop-timeout", "10")
    assert set(rows["worker"]) == {0, 1} and rows["trace_id"].isna().all()
    assert len(spans) == len(rows) and {s["attributes"]["llmload.request_id"] for s in spans} == \
        set(rows["request_id"])
    assert len({s["trace_id"] for s in spans}) == len(spans)  # a fresh trace per request
    assert {s["attributes"]["llmload.worker"] for s in spans} == {0, 1}
