"""A LoRA mix against the mock's adapter slots: the mock's /v1/models, /metrics and 404; a real Locust
run of a models: mix whose rows, llm_stats and report break every metric down per model, in the mix's
shares (a 4-sigma binomial bound), with a per-model SLO judged on that model's requests alone: the
adapters that share one slot (and pay its load) break theirs, the one that keeps its slot holds."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.support.locust_runs import report, run_scenario
from tests.support.processes import ROOT, free_port

ADAPTERS = ("adapter-a", "adapter-b", "adapter-c")
SHARES = {"adapter-a": 0.8, "adapter-b": 0.1, "adapter-c": 0.1}
# Two slots for three adapters: adapter-a (most of the traffic, ~200-ms streams of varied length: always
# some running, so never the idle one evicted, but for the cold start) keeps one, b and c take turns in the
# other, each turn paying 150 ms of load: their TTFT p95 is over 150 ms, a's the mock's 10 ms plus the trip.
MOCK = ("--profile", "fixed", "--ttft-ms", "10", "--itl-ms", "10", "--model", "base",
        "--lora-adapters", ",".join(ADAPTERS), "--max-loras", "2", "--lora-load-ms", "150")
SCENARIO = """
seed: 4
workloads:
  tenants:
    models: {adapter-a: 0.8, adapter-b: 0.1, adapter-c: 0.1}
    input_tokens: 16
    output_tokens: {dist: uniform, min: 10, max: 30}
    ignore_eos: true
"""


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_mock_lists_its_adapters_shows_the_lora_gauge_and_answers_an_unknown_model_404(mock_factory):
    mock = mock_factory(*MOCK)
    status, body = get(mock.url + "/v1/models")
    cards = json.loads(body)["data"]
    assert status == 200 and [c["id"] for c in cards] == ["base", *ADAPTERS]
    assert [c["parent"] for c in cards] == [None, "base", "base", "base"]
    code, answer = post(mock.url + "/v1/chat/completions", {"model": "adapter-z", "max_tokens": 2,
                                                            "messages": [{"role": "user", "content": "hi"}]})
    assert code == 404 and answer["error"]["message"] == "The model `adapter-z` does not exist."
    assert answer["error"]["type"] == "NotFoundError"
    code, answer = post(mock.url + "/v1/chat/completions", {"model": "adapter-b", "max_tokens": 2,
                                                            "messages": [{"role": "user", "content": "hi"}]})
    assert code == 200 and answer["model"] == "adapter-b"
    _, metrics = get(mock.url + "/metrics")
    gauge = [line for line in metrics.decode().splitlines() if line.startswith("vllm:lora_requests_info{")]
    assert len(gauge) == 1 and gauge[0].startswith('vllm:lora_requests_info{max_lora="2",waiting_lora_adapters="",'
                                                   'running_lora_adapters=""} ')


def test_a_lora_mix_is_broken_down_per_model_in_its_shares_and_each_model_slo_judged_alone(mock_factory, tmp_path):
    mock = mock_factory(*MOCK)
    rows, _out, prefix = run_scenario(tmp_path, mock, SCENARIO, "lora", "-u", "24", "-r", "24", "-t", "14s",
                                      "--stop-timeout", "5", "--seed", "9")
    assert set(rows["model"]) == set(ADAPTERS)
    n = len(rows)
    counts = rows["model"].value_counts()
    for model, p in SHARES.items():  # every row is one draw of the mix
        assert abs(counts[model] - n * p) <= 4 * math.sqrt(n * p * (1 - p)), (model, counts[model], n)
    log = mock.log_by_id(expect=n)
    assert set(log) == set(rows["request_id"])

    with open(f"{prefix}_llm_stats.csv", newline="") as f:
        stats = list(csv.DictReader(f))
    scenario_row = next(r for r in stats if not r["model"])
    per_model = {r["model"]: r for r in stats if r["model"]}
    assert set(per_model) == set(ADAPTERS) and all(r["scenario"] == "tenants" for r in per_model.values())
    assert sum(int(r["requests"]) for r in per_model.values()) == int(scenario_row["requests"]) == n
    # the whole run, the cold start too: b's waits and loads against a's own slot
    assert float(per_model["adapter-b"]["p95_ttft_ms"]) > 150 > 50 > float(per_model["adapter-a"]["median_ttft_ms"])

    data = report(prefix, tmp_path, "adapter-a:ttft_p95_ms=100", "adapter-b:ttft_p95_ms=100")
    models = {r["model"]: r for r in data["models"]["rows"]}
    measured = data["models"]["requests"]
    for model, p in SHARES.items():
        assert abs(models[model]["share"] * measured - measured * p) <= 4 * math.sqrt(measured * p * (1 - p)) + 1
    assert models["adapter-a"]["slo"]["adapter-a:ttft_p95_ms"]["met"]
    assert not models["adapter-b"]["slo"]["adapter-b:ttft_p95_ms"]["met"]
    assert "adapter-b:ttft_p95_ms" not in models["adapter-a"]["slo"]  # each model: its own SLOs alone
    step = data["steps"][0]
    assert step["slo"]["adapter-a:ttft_p95_ms"]["met"] and not step["slo"]["adapter-b:ttft_p95_ms"]["met"]
    assert "adapter-b:ttft_p95_ms" in data["capacity"]["limited_by"]
    assert "adapter-a:ttft_p95_ms" not in data["capacity"]["limited_by"]
    assert "## Models" in data["_md"]

    # compare: per-model rows when both runs have models (the same run twice here), each model priced at the
    # capacity adapter-a's SLO gives (the step holds it)
    out = tmp_path / "cmp"
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "compare", str(prefix), str(prefix), "--label", "one",
                          "--label", "two", "--warmup-s", "2", "--slo", "adapter-a:ttft_p95_ms=100",
                          "--gpu-hourly-usd", "2.0", "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    cmp = json.loads((out / "compare.json").read_text())["models"]
    assert set(cmp) == set(ADAPTERS) and cmp["adapter-a"]["one"] == cmp["adapter-a"]["two"]
    assert cmp["adapter-a"]["one"]["share"] == models["adapter-a"]["share"]
    assert all(cmp[m]["one"]["cost.usd_per_request"] > 0 for m in ADAPTERS)
    assert "## Per model" in (out / "compare.md").read_text()

    # the cost split: the capacity's dollars per hour over the models by their share of its step's tokens
    out = tmp_path / "priced"
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "2", "--slo",
                          "adapter-a:ttft_p95_ms=100", "--gpu-hourly-usd", "2.0", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    priced = json.loads((out / "report.json").read_text())
    rows = priced["models"]["rows"]
    assert sum(r["cost"]["usd_per_hour"] for r in rows) == pytest.approx(priced["cost"]["usd_per_hour"], rel=1e-5)
    tokens = {r["model"]: r["prompt_tokens"] + r["completion_tokens"] for r in rows}  # one step: its window
    for r in rows:
        assert r["cost"]["token_share"] == pytest.approx(tokens[r["model"]] / sum(tokens.values()), abs=1e-5)


def test_two_processes_merge_each_models_stats_exactly(mock_factory, tmp_path):
    mock = mock_factory(*MOCK)
    port = str(free_port())  # not Locust's default 5557: another run on the machine may hold it
    rows, _out, prefix = run_scenario(tmp_path, mock, SCENARIO, "procs", "-u", "12", "-r", "12", "-t", "6s",
                                      "--processes", "2", "--master-port", port, "--master-bind-port", port,
                                      "--stop-timeout", "10")
    assert set(rows["worker"]) == {0, 1}
    with open(f"{prefix}_llm_stats.csv", newline="") as f:
        per_model = {r["model"]: r for r in csv.DictReader(f) if r["model"]}
    for model in ADAPTERS:  # the master's merged histograms and counts: every row of the model, once
        mine = rows[rows["model"] == model]
        ok = mine[mine["status"] == "ok"]
        assert int(per_model[model]["requests"]) == len(mine) and int(per_model[model]["ok"]) == len(ok)
        assert int(per_model[model]["output_tokens"]) == int(ok["completion_tokens"].sum())
        assert float(per_model[model]["max_ttft_ms"]) == ok["ttft_ms"].max()
