"""Scenario workloads in real Locust runs against `llmload mock`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.support.locust_runs import run_scenario


def scenario_run(tmp_path, mock, yaml_text: str, name: str, users: int, seconds: int, *extra: str) -> pd.DataFrame:
    rows, out, _prefix = run_scenario(tmp_path, mock, yaml_text, name, "-u", str(users), "-r", str(users),
                                      "-t", f"{seconds}s", "--stop-timeout", "10", *extra)
    return rows, out


RAG = """
seed: 3
workloads:
  rag:
    input_tokens: 60
    output_tokens: 16
    ignore_eos: true
    prefix: {groups: [{name: doc, tokens: 2000, count: 2, popularity: uniform}]}
"""
NO_PREFIX = """
seed: 3
workloads:
  rag:
    input_tokens: 2060
    output_tokens: 16
    ignore_eos: true
"""


def test_rag_prefixes_hit_the_cache_and_lower_ttft(mock_factory, tmp_path):
    mock = mock_factory("--profile", "llama3-70b-2xa100")
    with_prefix, out = scenario_run(tmp_path, mock, RAG, "rag", 4, 8)
    without, _ = scenario_run(tmp_path, mock, NO_PREFIX, "flat", 4, 8)
    ok = with_prefix[with_prefix["status"] == "ok"]
    assert (ok["cached_tokens"] > 0).mean() > 0.8  # all but the first use of each prefix
    assert ok["cached_tokens"].max() == 2000
    assert (without[without["status"] == "ok"]["cached_tokens"] == 0).all()
    assert ok["ttft_ms"].median() < 0.5 * without[without["status"] == "ok"]["ttft_ms"].median()
    assert "prefix-cache hit ratio" in out and "expected from the scenario" in out


MIX = """
seed: 9
workloads:
  chat:
    weight: 2
    input_tokens: {dist: uniform, min: 50, max: 150}
    output_tokens: 12
    ignore_eos: true
  conv:
    weight: 1
    system_prompt: "you are terse"
    input_tokens: 30
    output_tokens: {dist: uniform, min: 10, max: 20}
    ignore_eos: true
    session: {turns: 3, think_time_s: {dist: uniform, min: 0.3, max: 0.5}}
  open:
    weight: 1
    input_tokens: 40
    output_tokens: 8
    ignore_eos: true
    arrival: {mode: open, rate: 10, max_in_flight: 4}
"""


def test_mixed_run_sessions_and_open_loop(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    rows, out = scenario_run(tmp_path, mock, MIX, "mix", 8, 8)
    ok = rows[rows["status"] == "ok"]
    assert set(ok["scenario"]) == {"chat", "conv", "open"}
    stats = pd.read_csv(tmp_path / "mix_llm_stats.csv")
    assert set(stats["scenario"]) == {"chat", "conv", "open", "Aggregated"}
    # requested input lengths land within 10 % of what the server counted (exactly, for the mock)
    rel = (ok["requested_input_tokens"] - ok["prompt_tokens"]).abs() / ok["prompt_tokens"]
    assert (rel <= 0.10).all()
    # sessions: prompt tokens grow turn by turn, and think time separates the turns
    conv = ok[ok["scenario"] == "conv"].sort_values(["session_id", "turn"])
    full = [g for _, g in conv.groupby("session_id") if list(g["turn"]) == [1, 2, 3]]
    assert len(full) >= 2
    for g in full:
        p = list(g["prompt_tokens"])
        assert p[0] < p[1] < p[2]
        # turn k+1 = turn k's prompt + its reply + a new 30-word message
        assert p[1] == p[0] + g["completion_tokens"].iloc[0] + 30
        starts, ends = list(g["start_time"]), list(g["start_time"] + g["e2e_ms"] / 1000)
        gaps = np.array(starts[1:]) - np.array(ends[:-1])
        assert (gaps >= 0.29).all() and (gaps < 1.0).all()
    # open loop: scheduled times recorded, arrivals near 10/s, the send never before its slot
    op = rows[rows["scenario"] == "open"]
    assert op["scheduled_time"].notna().all() and (op["arrival_rate"] == 10).all()
    assert (op["start_time"] >= op["scheduled_time"] - 0.002).all()
    span = op["scheduled_time"].max() - op["scheduled_time"].min()
    assert 5 <= (len(op) - 1) / span <= 16
    assert "input tokens requested" in out
