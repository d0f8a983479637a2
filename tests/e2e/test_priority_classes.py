"""Priority classes end to end: real Locust runs against the mock's priority policy.

A mock with 4 sequences is saturated by a small interactive class and a large batch class. With
``--scheduling priority`` the interactive class keeps its TTFT SLO while the batch class breaks
and is shed; ``--isolation`` runs each class alone, then together, and the report's leakage of
the interactive class is large under fcfs and small under priority. Every assertion compares the
classes (or the two policies) with wide margins, never a tight absolute time: on a loaded 2-core
machine absolute milliseconds move.
"""

from __future__ import annotations

import re
import urllib.request

from tests.support.locust_runs import LOCUST, SCENARIO_LOCUSTFILE, llmload_lines, report, run, run_scenario

ENGINE = ("--profile", "llama3-70b-2xa100", "--max-num-seqs", "4", "--step-base-ms", "25", "--step-per-seq-ms", "0",
          "--step-per-prefill-token-ms", "0", "--step-per-context-token-ms", "0", "--api-overhead-ms", "0",
          "--kv-capacity-tokens", "10000000")
# 2 interactive users (10 tokens: 0.25 s a request alone) beside 10 batch users (40 tokens: 1 s) on 4 slots
SCENARIO = """
seed: 3
defaults: {ignore_eos: true, input_tokens: 20}
workloads:
  interactive:
    weight: 1
    priority: {class: high, value: 0}
    output_tokens: 10
  batch:
    weight: 5
    priority: {class: low, value: 10}
    output_tokens: 40
"""
SLOS = ("interactive:ttft_p95_ms=600", "batch:ttft_p95_ms=600")
# The isolation runs: 4 interactive users (as many as the slots: alone they never queue) beside 8 batch users,
# 12 s a phase: under fcfs the interactive class waits seconds for a slot, and 8 s left it 4 samples together
# on a busy host
ISOLATION_SCENARIO = SCENARIO.replace("weight: 5", "weight: 2")


def _preemptions(mock) -> float:
    with urllib.request.urlopen(mock.url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return float(re.search(r"^vllm:num_preemptions_total\{[^}]*\} (\S+)$", text, re.M).group(1))


def test_priority_scheduling_keeps_the_urgent_class_within_its_slo_while_the_batch_class_breaks(mock_factory,
                                                                                                tmp_path):
    mock = mock_factory(*ENGINE, "--scheduling", "priority", "--max-queue", "4")
    rows, _, prefix = run_scenario(tmp_path, mock, SCENARIO, "prio", "-u", "12", "-r", "100", "-t", "15s",
                                   "--exit-code-on-error", "0")  # shed requests are failures to Locust
    assert set(rows["priority"].dropna()) == {"high", "low"}
    assert dict(rows.groupby("scenario")["priority"].first()) == {"interactive": "high", "batch": "low"}
    shed = rows[rows["http_status"] == 429]
    assert len(shed) > 0 and set(shed["priority"]) == {"low"}  # the least urgent class is shed, only it
    assert _preemptions(mock) > 0  # interactive arrivals took batch requests' slots

    data = report(prefix, tmp_path, *SLOS)
    classes = data["priority_classes"]["classes"]
    high, low = classes["high"], classes["low"]
    assert high["slo_met"] is True and low["slo_met"] is False, (high, low)
    assert high["slos"]["interactive:ttft_p95_ms=600"]["attainment"] > 0.9
    assert low["slos"]["batch:ttft_p95_ms=600"]["attainment"] < 0.5
    assert low["ttft_ms"]["p95"] > 3 * high["ttft_ms"]["p95"]
    assert high["shed_rate"] == 0 and low["shed_rate"] > 0.05
    assert "## Priority classes" in data["_md"]


def _isolation_run(mock_factory, tmp_path, policy: str) -> dict:
    mock = mock_factory(*ENGINE, "--scheduling", policy)
    rows, _, prefix = run_scenario(tmp_path, mock, ISOLATION_SCENARIO, f"iso_{policy}", "--isolation",
                                     "--isolation-users", "12", "--isolation-seconds", "12", timeout=240)
    phases = {p: set(g["priority"]) for p, g in rows.groupby("phase")}
    # each class ran alone in its phase (most urgent first), then both together
    assert phases == {"alone:high": {"high"}, "alone:low": {"low"}, "together": {"high", "low"}}, phases
    first = rows.groupby("phase")["start_time"].min()
    assert first["alone:high"] < first["alone:low"] < first["together"]
    (tmp_path / policy).mkdir()
    data = report(prefix, tmp_path / policy, *SLOS)
    assert data["run"]["shape"]["isolation"]["users"] == 12
    assert "## Isolation: each class alone vs together" in data["_md"]
    return data["isolation"]


def test_isolation_reports_a_large_leakage_under_fcfs_and_a_small_one_under_priority(mock_factory, tmp_path):
    fcfs = _isolation_run(mock_factory, tmp_path, "fcfs")
    prio = _isolation_run(mock_factory, tmp_path, "priority")
    for iso in (fcfs, prio):
        assert iso["classes"] == ["high", "low"] and iso["most_urgent"] == "high"
        high = iso["per_class"]["high"]
        assert high["alone"]["samples"]["ttft"] >= 10 and high["together"]["samples"]["ttft"] >= 5
    fcfs_leak, prio_leak = fcfs["leakage"]["ttft_p95_ms"], prio["leakage"]["ttft_p95_ms"]
    # fcfs: the interactive class waits behind batch requests for a slot (seconds); priority: it takes one
    assert fcfs_leak["pct"] > 200, fcfs
    assert prio_leak["ms"] < fcfs_leak["ms"] / 4, (prio_leak, fcfs_leak)


def test_isolation_without_a_class_on_every_workload_fails_once_at_init(tmp_path):
    scenario = tmp_path / "half.yaml"
    scenario.write_text("workloads:\n  a: {priority: {class: x, value: 0}}\n  b: {input_tokens: 5}\n")
    locustfile = tmp_path / "half.py"
    locustfile.write_text(SCENARIO_LOCUSTFILE.format(path=str(scenario)))
    res = run([*LOCUST, "-f", str(locustfile), "--host", "http://127.0.0.1:9", "--headless", "--isolation"], tmp_path)
    assert res.returncode == 1, res.stdout[-1000:] + res.stderr[-2000:]
    lines = llmload_lines(res)
    assert len(lines) == 1 and "--isolation: " in lines[0] and "workloads.b has no priority: class" in lines[0], lines
