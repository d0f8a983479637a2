"""Real `locust` runs against a real engine: llama.cpp's llama-server with the tiny random-weight
model (tests/llamacpp.py). The chat and RAG locustfiles, a multi-turn session, a 2-worker
distributed run and a run that overloads the server's slots.

In every run nothing is lost and every row's token counts are the server's: the rows' sums of
``completion_tokens`` and ``prompt_tokens`` equal what the server's own ``/metrics`` counters grew
by (``tokens_predicted_total``; ``prompt_tokens_total`` + ``prompt_tokens_cached_total``), and every
request asked for is a row (``--stop-timeout`` lets the last requests finish; none is cancelled).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from scripts.llama_server import start_llama_server, stop_llama_server
from tests.support.llamacpp import (
    LlamaServer,
    server_args,
    tiny_model_fixture,  # noqa: F401  (the fixture)
)
from tests.support.llamacpp_binary import build_or_fail
from tests.support.processes import ROOT, free_port

LOCUST = [sys.executable, "-m", "locust"]
N_SLOTS = 4
CTX = 12288  # a RAG prompt of the shipped scenario is ~10k of this model's tokens (4.6 per word)


@pytest.fixture(scope="module")
def server(tiny_model):
    binary = build_or_fail()
    log_path = tiny_model.with_name("llama-server-e2e.log")
    proc, url = start_llama_server(tiny_model, 0, server_args(N_SLOTS, CTX, "tiny-llama"), binary=binary,
                                   log_path=log_path)
    yield LlamaServer(url=url, proc=proc, model=tiny_model, binary=binary, log_path=log_path, ctx_per_slot=CTX)
    stop_llama_server(proc)


def run(server: LlamaServer, tmp_path, locustfile: str, *args: str, timeout: float = 240) -> pd.DataFrame:
    tmp_path.mkdir(parents=True, exist_ok=True)
    prefix = tmp_path / "run"
    before = server.metrics()
    env = {**os.environ, "PYTHONPATH": ROOT}
    res = subprocess.run([*LOCUST, "-f", os.path.join(ROOT, "locustfiles", locustfile), "--host", server.url,
                          "--headless", "--csv", str(prefix), "--stop-timeout", "120", *args],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    (tmp_path / "locust.log").write_text(res.stdout + res.stderr)  # whole: a failure's cause is rarely at the end
    assert res.returncode == 0, f"whole log: {tmp_path / 'locust.log'}\n" + res.stdout[-2000:] + res.stderr[-3000:]
    rows = pd.read_csv(f"{prefix}_requests.csv", keep_default_na=False, na_values=[""])
    after = server.metrics()
    assert len(rows) > 0
    assert set(rows["status"]) == {"ok"}, rows["status"].value_counts().to_dict()  # none cancelled, none lost
    assert (rows["token_source"] == "usage").all()
    grown = {k: after[k] - before.get(k, 0.0) for k in ("tokens_predicted_total", "prompt_tokens_total",
                                                       "prompt_tokens_cached_total")}
    assert rows["completion_tokens"].sum() == grown["tokens_predicted_total"], grown
    assert rows["prompt_tokens"].sum() == grown["prompt_tokens_total"] + grown["prompt_tokens_cached_total"], grown
    return rows


def test_chat_locustfile(server, tmp_path):
    rows = run(server, tmp_path, "chat.py", "-u", "4", "-r", "4", "-t", "4s", "--input-tokens", "20-120",
               "--output-tokens", "32")
    assert (rows["completion_tokens"] == 32).all()  # ignore_eos: every reply exactly max_tokens
    # this model writes 32 tokens in ~8 ms: a read may carry them all (TPOT 0, counted as coalesced)
    assert rows["ttft_ms"].notna().all() and (rows["tpot_ms"] >= 0).all()
    assert ((rows["tpot_ms"] > 0) | (rows["coalesced_reads"] > 0)).all()


def test_rag_locustfile_reports_llamacpps_prefix_cache(server, tmp_path):
    """The RAG locustfile with the shipped scenario's shape (two prefix groups, Zipf and uniform),
    scaled down: this model makes ~4.6 tokens of each word and prefills ~10k tokens in seconds on
    this CPU, so the shipped 2,000-word prefixes would give a handful of requests in a test."""
    scenario = tmp_path / "rag_small.yaml"
    scenario.write_text(
        "seed: 2\nworkloads:\n  rag:\n    input_tokens: {dist: uniform, min: 10, max: 30}\n    output_tokens: 16\n"
        "    ignore_eos: true\n    prefix:\n      groups:\n"
        "        - {name: handbook, tokens: 300, count: 2, popularity: zipf, zipf_s: 1.2, weight: 3}\n"
        "        - {name: faq, tokens: 120, count: 3, popularity: uniform, weight: 1}\n")
    rows = run(server, tmp_path, "rag.py", "-u", "4", "-r", "4", "-t", "5s", "--scenario", str(scenario))
    assert (rows["completion_tokens"] == 16).all()
    hits = rows[rows["cached_tokens"] > 100]
    assert len(hits) >= len(rows) // 3, rows["cached_tokens"].describe()
    # a hit reuses its slot's earlier prompt up to the shared prefix (300 words are > 1,000 tokens)
    assert hits["cached_tokens"].max() > 1000
    assert (rows["cached_tokens"] < rows["prompt_tokens"]).all()


def test_multi_turn_sessions_carry_the_real_replies(server, tmp_path):
    scenario = tmp_path / "turns.yaml"
    scenario.write_text("workloads:\n  turns:\n    input_tokens: {dist: uniform, min: 10, max: 30}\n"
                        "    output_tokens: 12\n    ignore_eos: true\n"
                        "    session: {turns: 3, think_time_s: 0.05}\n")
    rows = run(server, tmp_path, "multi_turn.py", "-u", "2", "-r", "2", "-t", "4s", "--scenario", str(scenario))
    full = rows.groupby("session_id").filter(lambda g: sorted(g["turn"]) == [1, 2, 3])
    assert full["session_id"].nunique() >= 2
    for _, g in full.groupby("session_id"):
        g = g.sort_values("turn")
        assert g["prompt_tokens"].is_monotonic_increasing  # each turn carries the last one's prompt and reply
        assert (g["prompt_tokens"].diff().dropna() > 12).all()


def test_two_worker_processes(server, tmp_path):
    port = str(free_port())
    rows = run(server, tmp_path, "chat.py", "-u", "6", "-r", "6", "-t", "4s", "--processes", "2",
               "--master-bind-port", port, "--master-port", port, "--input-tokens", "20-60",
               "--output-tokens", "24")
    assert set(rows["worker"]) == {0, 1}
    assert (rows["completion_tokens"] == 24).all()


def test_overloading_the_slots_queues_requests_and_loses_none(server, tmp_path):
    """12 users on 4 slots: a third of the requests at a time run, the rest wait in the server's
    queue (llama.cpp defers them); all complete, and the waiting shows in TTFT."""
    light = run(server, tmp_path / "light", "chat.py", "-u", "2", "-r", "2", "-t", "3s", "--input-tokens", "60",
                "--output-tokens", "64")
    heavy = run(server, tmp_path / "heavy", "chat.py", "-u", "12", "-r", "12", "-t", "4s", "--input-tokens", "60",
                "--output-tokens", "64")
    assert (heavy["completion_tokens"] == 64).all()
    assert heavy["ttft_ms"].median() > 2 * light["ttft_ms"].median()


def test_a_coding_agent_preset_reuses_the_engines_prefix_cache(server, tmp_path):
    """Call-graph sessions (issue 23) on the coding-agent preset, scaled down for this CPU: every
    call ok (run() checks the tokens against the server's counters), and the calls after the first
    of a session find their context in llama.cpp's prompt cache."""
    scenario = tmp_path / "agent.yaml"
    scenario.write_text(
        "seed: 4\nworkloads:\n  coder:\n    output_tokens: 12\n    ignore_eos: true\n    session:\n"
        "      kind: graph\n      preset: coding-agent\n      affinity_header: x-session-id\n"
        "      system_tokens: 40\n      shared_context_tokens: 150\n      task_tokens: 10-20\n      turns: 3\n"
        "      tool_result_tokens: 10-30\n      tool_latency_s: 0.02\n      output_tokens: 12\n"
        "      fanout_p: 0.5\n      fanout_width: 2\n")
    rows = run(server, tmp_path, "multi_turn.py", "-u", "2", "-r", "2", "-t", "5s", "--scenario", str(scenario))
    assert set(rows["step_kind"]) == {"graph"} and rows["call_id"].notna().all()
    follow = rows[rows["call_after"].notna()]
    assert len(follow) >= 4
    assert (follow["cached_tokens"] > 0).mean() >= 0.75, follow[["call_id", "cached_tokens", "prompt_tokens"]]
    firsts = rows[rows["call_after"].isna()]
    assert (rows.groupby("session_id")["call_id"].apply(lambda s: "m1" in set(s))).all()
    assert len(firsts) == rows["session_id"].nunique()
