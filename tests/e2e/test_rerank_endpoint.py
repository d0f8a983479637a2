"""Rerank and score against the mock: the answers' shapes, the fast transport's whole-body records
(a wrong index is a protocol error), and a Locust run of locustfiles/rerank.py whose rows match the
mock's log and whose report gives pairs/s and prices the endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.protocol import encode_body
from llmload.wire.rerank import check_rerank, check_score, rerank_body, score_body
from tests.support.locust_runs import load_rows, run_locust
from tests.support.processes import ROOT

DOCS = ["alpha beta", "gamma", "delta epsilon zeta", "eta theta"]


def rank(mock, rid: str, api: str, top_n: int | None = None, fault: str | None = None) -> R.RequestRecord:
    path = "/v1/rerank" if api == "rerank" else "/v1/score"
    t = FastTransport(mock.url, path, timeout=10, accept="application/json")
    t.connect()
    body = rerank_body("m", "which one", DOCS, top_n) if api == "rerank" else score_body("m", "which one", DOCS)

    def check(raw: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_rerank(raw, len(DOCS), top_n) if api == "rerank" else check_score(raw, len(DOCS))
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    try:
        return t.stream(encode_body(body), R.RequestMeta(rid, 0.0, api, inputs=len(DOCS)),
                        headers={"X-Mock-Fault": fault} if fault else None, check_body=check)
    finally:
        t.close()


def test_rerank_and_score_records_match_the_log_and_a_wrong_index_is_a_protocol_error(mock_factory):
    mock = mock_factory("--profile", "fixed", "--embed-base-ms", "5", "--rerank-per-pair-ms", "2")
    top = rank(mock, "top", "rerank", top_n=2)
    every = rank(mock, "every", "rerank")
    scored = rank(mock, "scored", "score")
    wrong = rank(mock, "wrong", "rerank", top_n=2, fault="wrong_index")
    wrong_score = rank(mock, "wrong-score", "score", fault="wrong_index")
    log = mock.log_by_id(expect=5)
    for rec in (top, every, scored):
        assert rec.status == "ok", rec.error
        assert rec.prompt_tokens == log[rec.meta.request_id]["prompt_tokens"] == 4 * 2 + 8
        assert rec.e2e_ms >= 5 + 2 * 4 - 0.5  # one step: 5 ms + 2 ms per pair
    assert wrong.status == "protocol_error" and "results[0].index: 4 is not a new index in 0..3" in wrong.error
    assert wrong_score.status == "protocol_error" and "data[0].index" in wrong_score.error
    assert log["wrong"]["outcome"] == "fault:wrong_index"


def test_a_locust_rerank_run_matches_the_mocks_log_and_the_report_gives_pairs_per_second(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--embed-base-ms", "2", "--rerank-per-pair-ms", "0.01")
    prefix = tmp_path / "rr"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "rerank.py"), "--host", mock.url, "-u", "4", "-r", "4",
                      "--csv", str(prefix), "--headless", "-t", "4s", "--stop-timeout", "5"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    ok = rows[rows["status"] == "ok"]
    assert len(ok) >= 50 and set(rows["status"]) <= {"ok", "cancelled"}
    log = mock.log_by_id(expect=len(rows))
    for r in ok.itertuples():
        e = log[r.request_id]
        assert (r.prompt_tokens, r.inputs) == (e["prompt_tokens"], e["inputs"])
    assert ok["inputs"].between(8, 32).all()
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1", "--slo",
                          "e2e_p95_ms=5000", "--gpu-hourly-usd", "2.0", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((out / "report.json").read_text())
    assert data["cost"]["usd_per_request"] > 0
    step = data["steps"][0]
    assert step["inputs_per_s"] == pytest.approx(step["rps"] * ok["inputs"].mean(), rel=0.15)
