"""Embeddings against the mock: its answer and cost model, the fast transport's whole-body records
(a missing vector is a protocol error), and a Locust run whose rows match the mock's log and whose
report prices the endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from llmload.metrics import record as R
from llmload.metrics.record import RequestMeta
from llmload.transport.fast import FastTransport
from llmload.wire.embeddings import check_embeddings, embeddings_body
from llmload.wire.protocol import encode_body
from tests.support.locust_runs import load_rows, run_locust
from tests.support.mock_client import post
from tests.support.processes import ROOT

EMBEDDINGS = os.path.join(ROOT, "locustfiles", "embeddings.py")


def embed(mock, rid: str, inputs: list[str], fault: str | None = None, **kw) -> R.RequestRecord:
    t = FastTransport(mock.url, "/v1/embeddings", timeout=10, accept="application/json")
    t.connect()
    fmt, dims = kw.get("encoding_format", "float"), kw.get("dimensions")

    def check(body: bytes, meta: RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_embeddings(body, len(inputs), dims, fmt)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    try:
        return t.stream(encode_body(embeddings_body("m", inputs, fmt, dims)),
                        RequestMeta(rid, 0.0, "embed", inputs=len(inputs)),
                        headers={"X-Mock-Fault": fault} if fault else None, check_body=check)
    finally:
        t.close()


def test_the_mock_answers_one_vector_per_input_in_either_encoding(mock_factory):
    mock = mock_factory("--profile", "fixed", "--embed-dim", "16")
    status, _, data = post(mock, "/v1/embeddings", {"model": "m", "input": ["a b c", "d e"]})
    answer = json.loads(data)
    assert status == 200 and [d["index"] for d in answer["data"]] == [0, 1]
    assert len(answer["data"][0]["embedding"]) == 16 and answer["usage"]["prompt_tokens"] == 5
    assert check_embeddings(data, 2).error is None
    _, _, data = post(mock, "/v1/embeddings", {"model": "m", "input": "x y", "encoding_format": "base64",
                                               "dimensions": 8})
    assert check_embeddings(data, 1, 8, "base64").error is None
    status, _, data = post(mock, "/v1/embeddings", {"model": "m", "input": []})
    assert status == 400 and b"non-empty list" in data


def test_records_match_the_mocks_log_and_a_missing_vector_is_a_protocol_error(mock_factory):
    mock = mock_factory("--profile", "fixed", "--embed-base-ms", "20", "--embed-per-token-ms", "1")
    ok = embed(mock, "ok", ["one two three", "four five"], dimensions=384)
    b64 = embed(mock, "b64", ["six seven"], encoding_format="base64")
    short = embed(mock, "short", ["a b", "c d", "e f"], fault="missing_vector")
    wrong_dim = embed(mock, "dim", ["g h"], dimensions=12)  # the mock gives 12: asked for, so right
    log = mock.log_by_id(expect=4)
    assert ok.status == "ok" and ok.prompt_tokens == log["ok"]["prompt_tokens"] == 5
    assert ok.ttft_ms is None and ok.completion_tokens == 0 and ok.token_source == "usage"
    assert ok.e2e_ms >= 20 + 5 - 0.5  # one step: 20 ms + 1 ms per token, and the answer's trip
    assert b64.status == "ok" and wrong_dim.status == "ok"
    assert short.status == "protocol_error" and short.error == "3 inputs, 2 vectors"
    assert log["short"]["outcome"] == "fault:missing_vector"


def test_a_locust_run_matches_the_mocks_log_and_the_report_prices_it(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--embed-base-ms", "2", "--embed-per-token-ms", "0.001")
    prefix = tmp_path / "emb"
    res = run_locust(["-f", EMBEDDINGS, "--host", mock.url, "-u", "4", "-r", "4", "--csv", str(prefix), "--headless",
                      "-t", "4s", "--stop-timeout", "5"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    ok = rows[rows["status"] == "ok"]
    assert len(ok) >= 100 and set(rows["status"]) <= {"ok", "cancelled"}
    log = mock.log_by_id(expect=len(rows))
    assert set(ok["request_id"]) <= set(log)
    for r in ok.itertuples():
        e = log[r.request_id]
        assert (r.prompt_tokens, r.inputs) == (e["prompt_tokens"], e["inputs"])
        assert r.e2e_ms >= (e["first_token_mono"] - e["arrival_mono"]) * 1000 - 0.5  # the answer was ready then
    assert ok["inputs"].between(1, 32).all() and ok["inputs"].nunique() > 5
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1", "--slo",
                          "e2e_p95_ms=5000", "--gpu-hourly-usd", "2.0", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((out / "report.json").read_text())
    assert data["cost"]["usd_per_request"] > 0, sorted(data)
    step = data["steps"][0]  # inputs/s and input tokens/s: each request's batch spread over its lifetime, as rps is
    per_request = ok["inputs"].mean(), ok["prompt_tokens"].mean()
    assert step["inputs_per_s"] == pytest.approx(step["rps"] * per_request[0], rel=0.15)
    assert step["input_tps"] == pytest.approx(step["rps"] * per_request[1], rel=0.15)
