"""The tokenizer-cost workload against a real llama-server (the suite's build): its ``POST /tokenize``
(``content`` in, ``tokens`` out: tools/server/server-context.cpp) passes llmload's check with the
token count the server's own tokenizer gives, and a short Locust run of ``endpoint: tokenize,
tokenize_format: llamacpp`` writes ok rows whose prompt_tokens are the server's counts."""

from __future__ import annotations

import types

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.protocol import encode_body
from llmload.wire.tokenize import check_tokenize, tokenize_body
from tests.support.llamacpp import MODEL_ALIAS, LlamaServer, llama_server_fixture, tiny_model_fixture  # noqa: F401
from tests.support.locust_runs import run_scenario

TEXT = "the quick brown fox jumps over the lazy dog, twice: the quick brown fox"


def test_llama_server_tokenize_passes_llmloads_check_with_its_own_count(llama_server: LlamaServer):
    own = llama_server.post_json("/tokenize", {"content": TEXT})["tokens"]
    t = FastTransport(llama_server.url, "/tokenize", timeout=60, accept="application/json")
    t.connect()

    def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_tokenize(body)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    try:
        rec = t.stream(encode_body(tokenize_body(MODEL_ALIAS, TEXT, "llamacpp")), R.RequestMeta("t", 0.0, "x"),
                       check_body=check)
        pieces = t.stream(encode_body({**tokenize_body(MODEL_ALIAS, TEXT, "llamacpp"), "with_pieces": True}),
                          R.RequestMeta("p", 0.0, "x"), check_body=check)
    finally:
        t.close()
    assert rec.status == R.OK, rec.error
    assert rec.prompt_tokens == len(own) > 5 and rec.e2e_ms > 0
    assert pieces.status == R.OK and pieces.prompt_tokens == len(own)  # {id, piece} objects


def test_a_locust_run_of_the_tokenizer_workload_against_llama_server(llama_server: LlamaServer, tmp_path):
    scenario = f"""
    seed: 4
    workloads:
      tok: {{endpoint: tokenize, tokenize_format: llamacpp, input_tokens: 50-200, model: {MODEL_ALIAS}}}
    """
    rows, _out, _prefix = run_scenario(tmp_path, types.SimpleNamespace(url=llama_server.url), scenario, "tok",
                                       "-u", "2", "-r", "2", "-t", "4s", "--stop-timeout", "20", timeout=180)
    ok = rows[rows["status"] == "ok"]
    assert len(ok) >= 5 and set(rows["status"]) <= {"ok", "cancelled"}, rows["error"].value_counts().to_dict()
    assert (ok["inputs"] == 1).all() and (ok["prompt_tokens"] > 0).all() and (ok["e2e_ms"] > 0).all()
    # the server's tokenizer, not the workload's word count: a word of the corpus is one or more tokens
    assert (ok["prompt_tokens"] >= ok["requested_input_tokens"] * 0.5).all()
