"""The tokenizer-cost workload against the mock: ``endpoint: tokenize`` in vLLM's and llama.cpp's shapes,
each row held to what the mock logged (the tokens it counted are the row's prompt_tokens), the report's
input tokens per second, and an answer whose count is wrong a protocol_error."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.endpoints import endpoint, part
from llmload.wire.protocol import encode_body
from llmload.wire.tokenize import tokenize_body
from tests.support.locust_runs import run_scenario
from tests.support.processes import ROOT

TOKENIZE = """
seed: 3
workloads:
  vllm_shape: {endpoint: tokenize, input_tokens: 20-60, slo: {e2e_p95_ms: 5000}}
  llamacpp_shape: {endpoint: tokenize, input_tokens: 100, tokenize_format: llamacpp}
"""


def test_tokenize_rows_match_the_mocks_log_in_both_shapes_and_are_reported(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed")
    rows, _out, prefix = run_scenario(tmp_path, mock, TOKENIZE, "tok", "-u", "4", "-r", "4", "-t", "4s",
                                      "--stop-timeout", "5")
    log = mock.log_by_id(expect=len(rows))
    assert set(rows["request_id"]) == set(log) and set(rows["status"]) <= {"ok", "cancelled"}
    ok = rows[rows["status"] == "ok"]
    assert set(ok["scenario"]) == {"vllm_shape", "llamacpp_shape"} and (ok.groupby("scenario").size() >= 20).all()
    for r in ok.itertuples():
        e = log[r.request_id]
        assert e["reply"] == "tokenize" and e["outcome"] == "completed" and e["inputs"] == 1
        assert r.prompt_tokens == e["prompt_tokens"] == r.requested_input_tokens  # a word is a token to the mock
        assert r.inputs == 1 and r.e2e_ms > 0 and r.ttft_ms != r.ttft_ms  # NaN: no stream
    assert ok.loc[ok["scenario"] == "vllm_shape", "prompt_tokens"].between(20, 60).all()
    assert (ok.loc[ok["scenario"] == "llamacpp_shape", "prompt_tokens"] == 100).all()
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1",
                          "--scenario", str(tmp_path / "tok.yaml"), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    steps = json.loads((out / "report.json").read_text())["scenarios"]["llamacpp_shape"]["steps"][0]
    assert steps["inputs_per_s"] > 0  # requests per second; the tokens they tokenized per second:
    assert steps["input_tps"] == pytest.approx(steps["inputs_per_s"] * 100, rel=1e-3)


@pytest.mark.parametrize("fmt, error", [("vllm", r"count 4 but 3 tokens"),
                                        ("llamacpp", r"tokens\[2\]: .* is not a token id")])
def test_an_answer_whose_count_is_wrong_is_a_protocol_error(mock_factory, fmt, error):
    mock = mock_factory("--profile", "fixed")
    check = part(endpoint("tokenize").check)  # what the users hold every answer to

    def held(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check(body)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    t = FastTransport(mock.url, endpoint("tokenize").path, timeout=30, accept="application/json")
    body = encode_body(tokenize_body("mock", "three words here", fmt))
    try:
        good = t.stream(body, R.RequestMeta("good", 0.0, "x"), check_body=held)
        bad = t.stream(body, R.RequestMeta("bad", 0.0, "x"), check_body=held, headers={"X-Mock-Fault": "wrong_count"})
    finally:
        t.close()
    assert good.status == R.OK and good.prompt_tokens == 3
    assert bad.status == "protocol_error" and re.match(error, bad.error), bad.error
    log = mock.log_by_id(expect=2)
    assert (log["good"]["outcome"], log["bad"]["outcome"]) == ("completed", "fault:wrong_count")
