"""Embeddings against a real llama-server (the suite's build, llama.cpp 0c1e57098) started with
``--embeddings --pooling mean`` (the tiny model is a causal one: llama.cpp refuses pooling none for
OpenAI's shape): a separate instance; OpenAI's /v1/embeddings shape (one vector
per input with its index, usage.prompt_tokens), float and base64, held by llmload's checks, then a
short Locust run of locustfiles/embeddings.py whose rows are all ok."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.embeddings import check_embeddings, embeddings_body
from llmload.wire.protocol import encode_body
from scripts.llama_server import LlamaServerError, start_llama_server, stop_llama_server
from tests.support.llamacpp import tiny_model_fixture  # noqa: F401  (the fixture)
from tests.support.llamacpp_binary import build_or_fail
from tests.support.locust_runs import load_rows, run_locust
from tests.support.processes import ROOT


@pytest.fixture(scope="module")
def embedding_server(tiny_model) -> Iterator[str]:
    binary = build_or_fail()
    try:
        proc, url = start_llama_server(tiny_model, 0, ["--embeddings", "--pooling", "mean", "-np", "2", "-c", "2048",
                                                       "--alias", "tiny",
                                                       "--threads", "1"], binary=binary,
                                       log_path=tiny_model.with_name("llama-server-embeddings.log"))
    except LlamaServerError as e:
        pytest.fail(f"llama-server --embeddings did not start: {e}", pytrace=False)
    yield url
    stop_llama_server(proc)


def embed(url: str, inputs: list[str], fmt: str) -> tuple[R.RequestRecord, list]:
    t = FastTransport(url, "/v1/embeddings", timeout=60, accept="application/json")
    t.connect()
    seen: list = []

    def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_embeddings(body, len(inputs), None, fmt)
        seen.append(result)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    try:
        rec = t.stream(encode_body(embeddings_body("tiny", inputs, fmt)), R.RequestMeta("e", 0.0, "x"),
                       check_body=check)
    finally:
        t.close()
    return rec, seen


@pytest.mark.parametrize("fmt", ["float", "base64"])
def test_llama_server_embeddings_pass_llmloads_checks(embedding_server, fmt):
    rec, seen = embed(embedding_server, ["the first text", "a second, longer text to embed", "third"], fmt)
    assert rec.status == R.OK, rec.error
    assert rec.prompt_tokens is not None and rec.prompt_tokens > 0 and rec.e2e_ms > 0
    assert seen[0].dimension and seen[0].dimension > 0


def test_a_locust_run_against_llama_server_embeddings(embedding_server, tmp_path):
    prefix = tmp_path / "emb"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "embeddings.py"), "--host", embedding_server, "-u", "2",
                      "-r", "2", "--csv", str(prefix), "--headless", "-t", "4s", "--stop-timeout", "10",
                      "--input-tokens", "8-32"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    ok = rows[rows["status"] == "ok"]
    # each user's requests end ok (a busy machine made single ones take 0.5-3.5 s: 4 in the 4 s once)
    assert len(ok) >= 2 and set(rows["status"]) <= {"ok", "cancelled"}, json.dumps(
        rows[rows["status"] != "ok"]["error"].value_counts().to_dict())
    assert (ok["prompt_tokens"] > 0).all() and (ok["inputs"] >= 1).all()
