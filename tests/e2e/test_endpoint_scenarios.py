"""Endpoints mixed in one run from a scenario file, against the mock: chat, embeddings and rerank
workloads side by side (rows per scenario match the mock's log, each priced and judged by its own
SLO), a RAG pipeline (embed -> rerank -> chat per task, in order, the task's time judged), and
the mock's /metrics for pooling requests under vLLM's names."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.locust_runs import run_scenario
from tests.support.mock_client import post
from tests.support.processes import ROOT

MIX = """
seed: 1
workloads:
  talk: {input_tokens: 40, output_tokens: 8, slo: {ttft_p95_ms: 5000}}
  embed: {endpoint: embeddings, batch_size: 1-8, input_tokens: 16, encoding_format: base64, slo: {e2e_p95_ms: 5000}}
  rank: {endpoint: rerank, documents: 4-8, query_tokens: 8, document_tokens: 16, top_n: 3, slo: {e2e_p95_ms: 5000}}
"""

RAG = """
seed: 2
workloads:
  rag:
    pipeline: [embed, rerank, chat]
    query_tokens: 8
    documents: 6
    document_tokens: 20
    top_n: 2
    output_tokens: 6
    priority: {class: answer, value: 2}
    slo: {task_p95_s: 10}
"""

def run_report(prefix, tmp_path, *args: str) -> dict:
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1", *args,
                          "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    return json.loads((out / "report.json").read_text())


KIND = {"talk": "chat", "embed": "embeddings", "rank": "rerank"}  # the mock's log: "reply" per endpoint


def test_chat_embeddings_and_rerank_in_one_run_match_the_log_and_are_priced_each(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "10", "--itl-ms", "2", "--embed-base-ms", "2")
    rows, _out, prefix = run_scenario(tmp_path, mock, MIX, "mix", "-u", "6", "-r", "6", "-t", "5s",
                                      "--stop-timeout", "5")
    log = mock.log_by_id(expect=len(rows))
    assert set(rows["request_id"]) == set(log) and set(rows["status"]) <= {"ok", "cancelled"}
    ok = rows[rows["status"] == "ok"]
    assert set(ok["scenario"]) == {"talk", "embed", "rank"} and (ok.groupby("scenario").size() >= 20).all()
    # rows per scenario: as many as the mock saw of each endpoint, each row as the mock logged it
    kinds = Counter("chat" if e["reply"] not in ("embeddings", "rerank") else e["reply"] for e in log.values())
    assert kinds == Counter(KIND[s] for s in rows["scenario"])
    for r in ok.itertuples():
        e = log[r.request_id]
        assert KIND[r.scenario] == ("chat" if e["reply"] not in ("embeddings", "rerank") else e["reply"])
        assert r.prompt_tokens == e["prompt_tokens"]
        if r.scenario == "talk":
            assert r.completion_tokens == e["tokens_sent"] == 8 and np.isnan(r.inputs)
        else:
            assert r.inputs == e["inputs"] and np.isnan(r.ttft_ms)
    embed, rank = ok[ok["scenario"] == "embed"], ok[ok["scenario"] == "rank"]
    assert embed["inputs"].between(1, 8).all() and embed["inputs"].nunique() > 3
    assert (embed["prompt_tokens"] == 16 * embed["inputs"]).all()
    assert rank["inputs"].between(4, 8).all()  # pairs: the passages of each query
    data = run_report(prefix, tmp_path, "--gpu-hourly-usd", "2", "--scenario", str(tmp_path / "mix.yaml"))
    sections = data["scenarios"]
    assert set(sections) == {"talk", "embed", "rank"}
    for name, section in sections.items():
        assert section["cost"]["usd_per_request"] > 0, name
        judged = section["steps"][0]["slo"]  # each workload by its own SLO (the file's, scoped to it)
        mine, other = ("ttft_p95_ms", "e2e_p95_ms") if name == "talk" else ("e2e_p95_ms", "ttft_p95_ms")
        assert judged[mine]["met"] is True and judged[mine]["n"] >= 20 and other not in judged, (name, judged)
    assert sections["embed"]["steps"][0]["inputs_per_s"] > sections["embed"]["steps"][0]["rps"]
    stats = pd.read_csv(f"{prefix}_llm_stats.csv")
    assert set(stats["scenario"]) == {"talk", "embed", "rank", "Aggregated"}


def test_a_rag_pipeline_runs_its_calls_in_order_and_is_judged_as_a_task(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "10", "--itl-ms", "2", "--embed-base-ms", "2")
    rows, _out, prefix = run_scenario(tmp_path, mock, RAG, "rag", "-u", "3", "-r", "3", "-t", "5s",
                                      "--stop-timeout", "5")
    log = mock.log_by_id(expect=len(rows))
    assert set(rows["request_id"]) == set(log)
    assert set(rows["scenario"]) == {"rag"} and set(rows["step_kind"]) == {"embed", "rerank", "chat"}
    assert set(rows["priority"]) == {"answer"}  # the pipeline's class in every call's row, not only the chat's
    tasks = [g.sort_values("turn") for _, g in rows.groupby("session_id")]
    whole = [g for g in tasks if len(g) == 3 and (g["status"] == "ok").all()]
    assert len(whole) >= 20 and all(len(g) <= 3 for g in tasks)
    spans = []
    for g in whole:
        assert list(g["step_kind"]) == ["embed", "rerank", "chat"] and list(g["turn"]) == [1, 2, 3]
        e = [log[rid] for rid in g["request_id"]]
        assert [x["reply"] for x in e[:2]] == ["embeddings", "rerank"] and e[2]["tokens_sent"] == 6
        # in order: each call reached the mock after the answer to the one before was ready (its send
        # may return after the next request's bytes came in)
        assert e[0]["first_token_mono"] < e[1]["arrival_mono"] and e[1]["first_token_mono"] < e[2]["arrival_mono"]
        assert list(g["inputs"])[:2] == [1, 6]  # the query embedded; its 6 passages ranked
        chat = g.iloc[2]
        assert chat["prompt_tokens"] == chat["requested_input_tokens"]  # the prompt: its top 2 passages + the query
        spans.append(chat["start_time"] + chat["e2e_ms"] / 1000 - g.iloc[0]["start_time"])
    data = run_report(prefix, tmp_path, "--scenario", str(tmp_path / "rag.yaml"))  # the file's SLOs
    task = data["traffic"]["tasks"]["rag"] if "traffic" in data else data["tasks"]["rag"]
    assert task["tasks"] == len(whole) and task["outcomes"]["answered"] == len(whole)
    assert task["task_s"]["p50"] == pytest.approx(float(np.percentile(spans, 50)), abs=0.002)
    assert task["task_s"]["p95"] == pytest.approx(float(np.percentile(spans, 95)), abs=0.002)
    slo = task["slo"]["task_p95_s"]
    assert slo["limit"] == 10 and slo["met"] is True and slo["share_within"] == 1.0
    stats = pd.read_csv(f"{prefix}_llm_stats.csv").set_index("scenario")
    assert stats.loc["rag", "tasks"] >= len(whole) and stats.loc["rag", "tasks_within_slo"] == 1.0


def test_the_mock_counts_pooling_requests_under_vllms_names(mock_factory):
    mock = mock_factory("--profile", "fixed", "--embed-base-ms", "1")
    tokens = 0
    for inputs in (["a b c", "d e"], ["f g h i"], ["j"]):
        status, _, data = post(mock, "/v1/embeddings", {"model": "m", "input": inputs})
        assert status == 200
        tokens += json.loads(data)["usage"]["prompt_tokens"]
    status, _, data = post(mock, "/v1/rerank", {"model": "m", "query": "q r", "documents": ["s t", "u"]})
    assert status == 200
    tokens += json.loads(data)["usage"]["prompt_tokens"]
    with urllib.request.urlopen(f"{mock.url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    samples = {(s.name, s.labels.get("finished_reason")): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("vllm:request_success_total", "stop")] == 4
    assert samples[("vllm:prompt_tokens_total", None)] == tokens
    assert samples[("vllm:request_prompt_tokens_sum", None)] == tokens
    assert samples[("vllm:e2e_request_latency_seconds_count", None)] == 4
    assert samples[("vllm:time_to_first_token_seconds_count", None)] == 4
    assert samples[("vllm:request_queue_time_seconds_count", None)] == 4
