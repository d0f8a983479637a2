"""llmload's fast transport against a real engine: llama.cpp's llama-server with a tiny model.

What llama.cpp (this version) sends, from its source (tools/server/server-task.cpp) and checked
here: a chat stream's usage chunk only with ``stream_options.include_usage``, carrying
``prompt_tokens_details.cached_tokens``; a /v1/completions stream's last chunk always carries
usage; the last chunk also carries ``timings`` (llama.cpp's own counts: ``cache_n``,
``prompt_n``, ``predicted_n`` ...).
"""

from __future__ import annotations

import json
import random

import gevent
import pytest

from llmload.metrics.record import OK, RequestMeta
from llmload.transport import FastTransport
from scripts.llama_server import (
    LlamaServerError,
    ensure_llama_server,
    server_args,
    start_llama_server,
    stop_llama_server,
    write_tiny_model,
)
from tests.support.llamacpp import (  # noqa: F401  (the fixtures)
    CTX_PER_SLOT,
    LlamaServer,
    llama_server_fixture,
    sse_events,
    tiny_model_fixture,
)


def words(n: int, seed: int) -> str:
    """n pseudo-words of lowercase letters: about 4 tokens each with the tiny model's vocabulary."""
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 6)))
                    for _ in range(n))


def chat_body(server: LlamaServer, content: str, max_tokens: int, usage: bool = True, **extra) -> bytes:
    body = {
        "model": server.model_alias, "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens, "stream": True, "temperature": 0, **extra,
    }
    if usage:
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def stream(server: LlamaServer, body: bytes, rid: str, path: str = "/v1/chat/completions"):
    t = FastTransport(server.url, path, timeout=60)
    t.connect()
    try:
        return t.stream(body, RequestMeta(request_id=rid, start_time=0.0, scenario="x"))
    finally:
        t.close()


def test_chat_stream_counts_tokens_from_usage(llama_server: LlamaServer):
    before = llama_server.metrics()["tokens_predicted_total"]
    rec = stream(llama_server, chat_body(llama_server, "hello there", 24), "usage-1")
    assert rec.status == OK, rec.error
    assert rec.http_status == 200
    assert rec.token_source == "usage"
    assert rec.completion_tokens == 24
    assert rec.finish_reason == "length"
    assert rec.prompt_tokens and rec.prompt_tokens > 10
    assert rec.ttft_ms is not None and rec.ttft_ms > 0 and rec.tpot_ms is not None
    # The server's own count, independent of the stream: its generated-tokens counter.
    assert llama_server.metrics()["tokens_predicted_total"] - before == 24


def test_max_tokens_exact_on_parallel_streams(llama_server: LlamaServer):
    """Four concurrent streams (one per slot), each with its own max_tokens: every record
    reports exactly what it asked for, from usage."""
    wanted = [5, 17, 40, 63]
    jobs = [gevent.spawn(stream, llama_server, chat_body(llama_server, f"question {i}", n), f"par-{i}")
            for i, n in enumerate(wanted)]
    gevent.joinall(jobs, timeout=120, raise_error=True)
    recs = [j.value for j in jobs]
    assert all(r is not None for r in recs), "a stream did not finish within 120 s"
    for n, rec in zip(wanted, recs, strict=True):
        assert rec.status == OK, rec.error
        assert (rec.token_source, rec.completion_tokens, rec.finish_reason) == ("usage", n, "length")


def test_shared_prefix_reports_cached_tokens(llama_server: LlamaServer):
    """The second prompt shares ~1,600 tokens with the first: llama.cpp reuses exactly the common
    token prefix from the slot that holds it and reports it as prompt_tokens_details.cached_tokens
    (prompt_tokens still counts all of them)."""
    prefix = words(400, seed=7)
    messages = [[{"role": "user", "content": f"{prefix} {q} question"}] for q in ("first", "second")]
    ids = [llama_server.chat_tokens(m) for m in messages]
    common = next(i for i, (a, b) in enumerate(zip(*ids, strict=False)) if a != b)
    assert common > 1500
    recs = [stream(llama_server, chat_body(llama_server, m[0]["content"], 4), f"prefix-{i}")
            for i, m in enumerate(messages)]
    assert [r.status for r in recs] == [OK, OK], [r.error for r in recs]
    assert [r.prompt_tokens for r in recs] == [len(i) for i in ids]
    assert recs[1].cached_tokens == common
    assert recs[0].prompt_tokens < CTX_PER_SLOT


def test_without_include_usage_tokens_come_from_chunks(llama_server: LlamaServer):
    """No usage chunk: llmload counts output chunks. The tiny model's tokens are all printable
    ASCII pieces, so llama.cpp sends exactly one chunk per token (a token that ends mid UTF-8
    character would be held back and merged into the next chunk)."""
    rec = stream(llama_server, chat_body(llama_server, "no usage please", 12, usage=False), "nousage-1")
    assert rec.status == OK, rec.error
    assert (rec.token_source, rec.completion_tokens, rec.finish_reason) == ("chunks", 12, "length")
    assert rec.prompt_tokens is None and rec.cached_tokens is None


def test_ignore_eos_is_honoured(tmp_path, llama_server: LlamaServer):
    """A model whose first choice is always end-of-sequence: without ignore_eos the reply stops
    at once (llama.cpp counts the EOS token: completion_tokens 1, no content, so llmload calls it
    empty); with ignore_eos it runs to exactly max_tokens."""
    model = write_tiny_model(tmp_path / "eos-first.gguf", eos_first=True)
    proc, url = start_llama_server(model, 0, server_args(1, 512), binary=llama_server.binary,
                                   log_path=tmp_path / "server.log")
    try:
        server = LlamaServer(url=url, proc=proc, model=model, binary=llama_server.binary,
                             log_path=tmp_path / "server.log")
        stops = stream(server, chat_body(server, "hi", 7), "eos-1")
        runs = stream(server, chat_body(server, "hi", 7, ignore_eos=True), "eos-2")
    finally:
        stop_llama_server(proc)
    assert (stops.status, stops.finish_reason, stops.completion_tokens, stops.token_source) == (
        "empty", "stop", 1, "usage")
    assert (runs.status, runs.finish_reason, runs.completion_tokens) == (OK, "length", 7)


def test_completions_stream_always_carries_usage(llama_server: LlamaServer):
    body = json.dumps({"model": llama_server.model_alias, "prompt": "once upon a time", "max_tokens": 9,
                       "stream": True, "temperature": 0}).encode()
    rec = stream(llama_server, body, "cmpl-1", path="/v1/completions")
    assert rec.status == OK, rec.error
    assert (rec.token_source, rec.completion_tokens, rec.finish_reason) == ("usage", 9, "length")


def test_context_overflow_is_an_http_400(llama_server: LlamaServer):
    rec = stream(llama_server, chat_body(llama_server, words(1200, seed=3), 4), "overflow-1")
    assert rec.status == "http_4xx" and rec.http_status == 400
    assert "context" in rec.error


def test_last_chunk_carries_timings(llama_server: LlamaServer):
    status, headers, body = llama_server.request(
        "POST", "/v1/chat/completions", json.loads(chat_body(llama_server, "timings", 6)))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 6
    assert last["timings"]["predicted_n"] == 6
    assert set(last["timings"]) >= {"cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms",
                                    "predicted_per_second"}


def test_metrics_names(llama_server: LlamaServer):
    status, headers, body = llama_server.get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    names = set(llama_server.metrics())
    assert names >= {"prompt_tokens_total", "prompt_tokens_cached_total", "tokens_predicted_total",
                     "requests_processing", "requests_deferred", "n_decode_total"}


def test_missing_build_tools_give_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMLOAD_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for var in ("CC", "CXX"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(LlamaServerError, match=r"missing cmake, a C\+\+ compiler .*apt-get install"):
        ensure_llama_server()


def test_tiny_model_is_deterministic(tmp_path):
    a, b, c = (write_tiny_model(tmp_path / f"{n}.gguf", seed=s) for n, s in (("a", 0), ("b", 0), ("c", 1)))
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
