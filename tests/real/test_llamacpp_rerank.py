"""Rerank against a real llama-server (the suite's build, llama.cpp 0c1e57098) started with
``--reranking``: a separate instance on the tiny model (random weights: the scores mean nothing,
the shape is what is held); Cohere/Jina's /v1/rerank shape (``results`` of index and
relevance_score, the ``top_n`` best, usage.prompt_tokens), then a short Locust run of
locustfiles/rerank.py whose rows are all ok."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.protocol import encode_body
from llmload.wire.rerank import check_rerank, rerank_body
from scripts.llama_server import LlamaServerError, start_llama_server, stop_llama_server
from tests.support.llamacpp import tiny_model_fixture  # noqa: F401  (the fixture)
from tests.support.llamacpp_binary import build_or_fail
from tests.support.locust_runs import load_rows, run_locust
from tests.support.processes import ROOT


@pytest.fixture(scope="module")
def rerank_server(tiny_model) -> Iterator[str]:
    binary = build_or_fail()
    try:
        proc, url = start_llama_server(tiny_model, 0, ["--reranking", "-np", "2", "-c", "4096", "--alias", "tiny",
                                                       "--threads", "1"], binary=binary,
                                       log_path=tiny_model.with_name("llama-server-rerank.log"))
    except LlamaServerError as e:
        pytest.fail(f"llama-server --reranking did not start: {e}", pytrace=False)
    yield url
    stop_llama_server(proc)


@pytest.mark.parametrize("top_n", [None, 2])
def test_llama_server_rerank_passes_llmloads_checks(rerank_server, top_n):
    docs = ["the first passage", "a second one, longer than the first", "third"]
    t = FastTransport(rerank_server, "/v1/rerank", timeout=60, accept="application/json")
    t.connect()

    def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_rerank(body, len(docs), top_n)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    try:
        rec = t.stream(encode_body(rerank_body("tiny", "which passage", docs, top_n)), R.RequestMeta("r", 0.0, "x"),
                       check_body=check)
    finally:
        t.close()
    assert rec.status == R.OK, rec.error
    assert rec.prompt_tokens is not None and rec.prompt_tokens > 0


def test_a_locust_run_against_llama_server_rerank(rerank_server, tmp_path):
    prefix = tmp_path / "rr"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "rerank.py"), "--host", rerank_server, "-u", "2",
                      "-r", "2", "--csv", str(prefix), "--headless", "-t", "8s", "--stop-timeout", "30"], tmp_path,
                     timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    ok = rows[rows["status"] == "ok"]
    # ~0.8 s a request quiet; a CI machine loaded by other work once made one request in 4 s: ask for one
    assert len(ok) >= 1 and set(rows["status"]) <= {"ok", "cancelled"}, rows["error"].value_counts().to_dict()
    assert (ok["inputs"] >= 8).all() and (ok["prompt_tokens"] > 0).all()
