"""Production-shaped load in real Locust runs against `llmload mock`: a Mooncake trace replayed by
two worker processes, agent tool loops with task metrics, image prompts, and the RAG example's
cache hits on the default mock."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from llmload.report import ReportOptions, build_report, parse_slo, write_report
from llmload.workload.file.scenario import load_scenario
from llmload.workload.trace.read import load_trace
from tests.support.locust_runs import run_locust, run_scenario
from tests.support.processes import ROOT, free_port

LAG_BOUND_MS = 50.0  # the median's
LAG_P99_BOUND_MS = 2000.0
MOONCAKE = os.path.join(ROOT, "scenarios", "data", "traces", "mooncake_sample.jsonl")

TRACE = f"""
seed: 14
workloads:
  mooncake:
    trace: {{path: {MOONCAKE}, time_scale: 0.25}}
"""


def test_mooncake_trace_replayed_by_two_processes(mock_factory, tmp_path):
    # The default mock (prefix caching on); short replies keep the run about the send times.
    mock = mock_factory("--output-mean-tokens", "16")
    port = str(free_port())  # not Locust's default 5557: another run on the machine may hold it
    rows, out, prefix = run_scenario(tmp_path, mock, TRACE, "trace", "-u", "80", "-r", "80", "--processes", "2",
                                     "--master-port", port, "--master-bind-port", port, "-t", "90s",
                                     "--stop-timeout", "20")
    trace = load_trace(MOONCAKE).requests
    # the run ended by itself once the trace was sent (well before -t), every request exactly once
    assert "every trace request is sent (2 worker processes); ending the run" in out
    assert len(rows) == len(trace) and (rows["status"] == "ok").all()
    assert set(rows["worker"]) == {0, 1}
    t0 = rows["scheduled_time"].min()
    sent: dict[tuple[int, int], list[float]] = {}
    for r in rows.itertuples():
        sent.setdefault((r.requested_input_tokens, r.max_tokens), []).append(r.scheduled_time - t0)
    want: dict[tuple[int, int], list[float]] = {}
    for r in trace:
        want.setdefault((r.input_tokens, r.output_tokens), []).append(r.t * 0.25)
    # the union of the two processes' shares is the trace, at its (scaled) times (CSV: µs)
    assert sent.keys() == want.keys()
    for key, times in want.items():
        assert np.allclose(sorted(sent[key]), sorted(times), atol=2e-6), key
    assert (rows["prompt_tokens"] == rows["requested_input_tokens"]).all()
    # send times: the row's start and the server's receive time, against the scheduled time
    lag_ms = (rows["start_time"] - rows["scheduled_time"]) * 1000
    log = mock.log_by_id(expect=len(rows))
    arrival_ms = np.array([(log[r.request_id]["arrival_unix"] - r.scheduled_time) * 1000 for r in rows.itertuples()])
    print(f"send lag ms p50 {np.percentile(lag_ms, 50):.3f} p99 {np.percentile(lag_ms, 99):.3f} "
          f"max {lag_ms.max():.1f}; server arrival − scheduled p50 {np.percentile(arrival_ms, 50):.3f} "
          f"p99 {np.percentile(arrival_ms, 99):.3f}")
    assert lag_ms.min() >= -0.5
    # p99 < 5 ms is the target, measured by benchmarks/trace_lag.py on a quiet machine (1.0-1.2 ms); on a
    # loaded 2-core machine it is 5-6 ms here. A clock or timer bug moves the median far more; a freeze of a
    # busy machine moves only the tail (p99 522 ms once beside a busy loop and three other test processes).
    assert np.percentile(lag_ms, 50) < LAG_BOUND_MS and np.percentile(arrival_ms, 50) < LAG_BOUND_MS
    assert np.percentile(lag_ms, 99) < LAG_P99_BOUND_MS and np.percentile(arrival_ms, 99) < LAG_P99_BOUND_MS
    # shared hash_ids: a request whose leading blocks an earlier, finished request had hits them
    by_time = rows.assign(t=rows["scheduled_time"] - t0).sort_values(["t", "requested_input_tokens"])
    finished: list[tuple[float, tuple[int, ...]]] = []
    checked = 0
    for req, r in zip(sorted(trace, key=lambda x: (round(x.t * 0.25, 4), x.input_tokens)),
                      by_time.itertuples(), strict=True):
        assert r.requested_input_tokens == req.input_tokens
        shared = max((_leading(ids, req.hash_ids) for end, ids in finished if end < r.start_time), default=0)
        if shared and req.input_tokens > 512:
            checked += 1
            assert r.cached_tokens >= 512, (req, r.cached_tokens)
        finished.append((r.start_time + r.e2e_ms / 1000, req.hash_ids))
    assert checked > 100
    stats = pd.read_csv(f"{prefix}_llm_stats.csv")
    assert stats.loc[0, "scheduled_requests"] == len(trace) and stats.loc[0, "cache_hit_ratio"] > 0.4
    assert "scheduled requests sent within" in out or "BEHIND SCHEDULE" in out


def _leading(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


AGENT = """
seed: 5
workloads:
  agent:
    system_prompt: "You are an operations agent."
    input_tokens: {dist: uniform, min: 40, max: 120}
    output_tokens: 12
    ignore_eos: true
    session:
      kind: agent
      max_steps: 4
      tools: 3
      tool_result_tokens: {dist: uniform, min: 50, max: 150}
      tool_latency_s: {dist: uniform, min: 0.05, max: 0.15}
    slo: {task_p95_s: 5}
"""


def test_agent_tasks_loop_over_tools_and_report_task_metrics(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5", "--tool-call-rate", "0.6",
                        "--seed", "4")
    rows, out, prefix = run_scenario(tmp_path, mock, AGENT, "agent", "-u", "6", "-r", "6", "-t", "8s",
                                     "--stop-timeout", "15")
    assert (rows["status"] == "ok").all()
    assert set(rows["step_kind"]) == {"task", "tool_result"}
    # the mock counts tools, tool calls and tool messages as the client does
    assert (rows["prompt_tokens"] == rows["requested_input_tokens"]).all()
    tasks = rows.groupby("session_id")
    turns = tasks["turn"].apply(list)
    assert all(t == list(range(1, len(t) + 1)) for t in turns)
    assert turns.map(len).max() == 4 and (turns.map(len) >= 2).sum() >= 3  # loops, capped at max_steps
    for _, g in tasks:
        g = g.sort_values("turn")
        assert list(g["step_kind"]) == ["task"] + ["tool_result"] * (len(g) - 1)
        assert (g["finish_reason"].iloc[:-1] == "tool_calls").all()  # only a tool call leads to a next call
        assert g["finish_reason"].iloc[-1] != "tool_calls" or len(g) == 4
        p = list(g["prompt_tokens"])
        assert all(a < b for a, b in zip(p, p[1:], strict=False))  # each call carries the tool results
    assert "tasks (" in out and "task time p50" in out and "of tasks finished within the task SLO" in out
    stats = pd.read_csv(f"{prefix}_llm_stats.csv").iloc[0]
    n_tasks = len(turns)
    assert stats["tasks"] == n_tasks and stats["tasks_within_slo"] == 1.0
    assert stats["calls_per_task"] == round(len(rows) / n_tasks, 3)
    assert stats["tasks_answered"] + stats["tasks_step_limit"] == n_tasks
    durations = tasks.apply(lambda g: (g["start_time"] + g["e2e_ms"] / 1000).max() - g["start_time"].min())
    assert abs(stats["p95_task_s"] - np.percentile(durations, 95)) < 0.1
    report = build_report(str(prefix), ReportOptions(slos=[parse_slo("task_p95_s=5"), parse_slo("ttft_p95_ms=500")],
                                                     warmup_s=0))
    write_report(report, str(tmp_path / "rep"))
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    t = data["tasks"]["agent"]
    assert t["tasks"] == n_tasks and t["slo"]["task_p95_s"]["met"] and t["slo"]["task_p95_s"]["share_within"] == 1.0
    assert t["calls_per_task"] == round(len(rows) / n_tasks, 3)
    assert "task_p95_s" not in data["steps"][0]["slo"]  # judged over tasks, not steps of requests
    assert "## Agent tasks" in (tmp_path / "rep" / "report.md").read_text()


VISION = """
seed: 8
workloads:
  vision:
    input_tokens: {dist: uniform, min: 20, max: 60}
    output_tokens: 8
    ignore_eos: true
    images: {count: 2, size: 640x480, format: jpeg, distinct: 3}
    session: {turns: 2}
"""


def test_image_prompts_count_text_plus_image_tokens(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "10", "--itl-ms", "2")
    rows, out, prefix = run_scenario(tmp_path, mock, VISION, "vision", "-u", "4", "-r", "4", "-t", "4s",
                                     "--stop-timeout", "10")
    ok = rows[rows["status"] == "ok"]
    assert len(ok) >= 8
    log = mock.log_by_id(expect=len(rows))
    image = np.array([log[r]["image_tokens"] for r in ok["request_id"]])
    per_image = 23 * 17  # 640x480 → 644x476 after Qwen2-VL's resize: 23 x 17 tokens of 28x28 pixels
    first, second = ok[ok["turn"] == 1], ok[ok["turn"] == 2]
    assert (first["requested_image_tokens"] == 2 * per_image).all()
    assert (second["requested_image_tokens"] == 4 * per_image).all()  # the first turn's pictures stay
    assert (ok["requested_image_tokens"].to_numpy() == image).all()
    assert (ok["prompt_tokens"] == ok["requested_input_tokens"] + ok["requested_image_tokens"]).all()
    assert "text +" in out and "image vs server-reported" in out
    report = build_report(str(prefix), ReportOptions(warmup_s=0))
    write_report(report, str(tmp_path / "rep"))
    split = json.loads((tmp_path / "rep" / "report.json").read_text())["input_tokens"]["vision"]
    assert split["image_tokens"] == int(ok["requested_image_tokens"].sum())
    assert split["text_tokens"] == int(ok["requested_input_tokens"].sum())


def test_rag_example_hits_the_default_mocks_prefix_cache(mock_factory, tmp_path):
    mock = mock_factory()  # the default profile: vllm-v1, prefix caching on
    prefix = tmp_path / "rag"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "rag.py"), "--host", mock.url, "--headless", "-u", "32",
                      "-r", "32", "-t", "12s", "--output-tokens", "8", "--csv", str(prefix), "--stop-timeout", "10"],
                     tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    stats = pd.read_csv(f"{prefix}_llm_stats.csv").iloc[0]
    expected = load_scenario(os.path.join(ROOT, "scenarios", "rag.yaml")).workloads[0].expected_prefix_hit_ratio()
    print(f"RAG on the default mock: {stats['requests']} requests, hit ratio {stats['cache_hit_ratio']:.4f}, "
          f"possible {expected:.4f}")
    assert stats["requests"] >= 300
    assert 0.9 * expected <= stats["cache_hit_ratio"] <= expected + 0.01
    assert "prefix-cache hit ratio" in res.stdout
