"""vLLM's prefix cache and profiler, driven by llmload (the session's server of tests/support/vllm.py,
which has prefix caching, the development endpoints and the torch profiler on).

* Over a RAG run (shared prefixes), the rows' ``cached_tokens`` add up to exactly what vLLM's
  ``vllm:prefix_cache_hits_total`` grew by, and ``--profile-step 2`` started vLLM's profiler
  around the second step and stopped it: its trace file is on disk. At both steps vLLM's TTFT
  delta and the rows cover the same requests (no negative mean gap beyond the scrapes' resolution).
* ``--reset-cache vllm`` empties the cache before a run: a repeat of a seeded run then finds about
  0 % of its prompt tokens cached, where the same repeat without it finds most of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.support.locust_runs import CHAT, SYNTHETIC, load_rows, run_locust
from tests.support.processes import ROOT
from tests.support.server_checks import assert_same_requests_and_no_negative_gap
from tests.support.vllm import Vllm  # the vllm_server fixture: tests/conftest.py


def test_a_rag_run_caches_what_vllm_counts_and_the_profiler_wraps_its_step(vllm_server: Vllm, tmp_path):
    scenario = tmp_path / "rag_small.yaml"
    scenario.write_text(
        "seed: 2\nworkloads:\n  rag:\n    input_tokens: {dist: uniform, min: 10, max: 40}\n    output_tokens: 8\n"
        "    ignore_eos: true\n    prefix:\n      groups:\n"
        "        - {name: handbook, tokens: 600, count: 2, popularity: zipf, zipf_s: 1.2, weight: 3}\n"
        "        - {name: faq, tokens: 200, count: 3, popularity: uniform, weight: 1}\n")
    before = vllm_server.metrics()
    traces_before = set(vllm_server.profile_dir.rglob("*")) if vllm_server.profile_dir.exists() else set()
    prefix = tmp_path / "rag"
    res = run_locust(["-f", SYNTHETIC, "--host", vllm_server.url, "--headless", "--csv", str(prefix), "--scenario",
                      str(scenario), "--steps", "2,4", "--step-seconds", "5", "--search-warmup-s", "1",
                      "--profile-step", "2", "--stop-timeout", "30", "--model", vllm_server.model,
                      # scrapes every 0.5 s: at the default 2 s a 4-s window held one scrape once, when a
                      # busy machine made a tick late, and one scrape bounds no delta
                      "--server-metrics-interval", "0.5"], tmp_path,
                     timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    after = vllm_server.metrics()
    rows = load_rows(prefix)
    assert set(rows["status"]) == {"ok"} and len(rows) >= 8
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    assert rows["cached_tokens"].sum() == hits, (rows["cached_tokens"].sum(), hits)
    assert rows["prompt_tokens"].sum() == queries  # every prompt token was looked up once
    assert hits > 0.3 * queries  # the shared documents were found cached
    # the join on the session's server: the same requests on both sides at both steps, no negative gap
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1", "--out",
                          str(out), "--no-archive"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr[-3000:]
    steps = json.loads((out / "report.json").read_text())["steps"]
    assert [s["users"] for s in steps] == [2, 4] and all(s["server"]["engine"] == "vllm" for s in steps)
    assert_same_requests_and_no_negative_gap(steps)
    manifest = json.loads((tmp_path / "rag_run.json").read_text())
    profiled = manifest["profile_step"]
    assert (profiled["step"], profiled["started"], profiled["stopped"], profiled["why_not"]) == (2, True, True, None)
    assert [(h["path"], h["http_status"]) for h in manifest["server_hooks"]] == [
        ("/start_profile", 200), ("/stop_profile", 200)]
    # vLLM writes the worker's trace when the profiler stops (gzip'd Chrome trace JSON)
    deadline = time.monotonic() + 60
    new: list = []
    while time.monotonic() < deadline:
        new = [p for p in vllm_server.profile_dir.rglob("*.json.gz") if p not in traces_before and p.stat().st_size]
        if new:
            break
        time.sleep(0.5)
    assert new, f"no trace in {vllm_server.profile_dir}: {sorted(vllm_server.profile_dir.rglob('*'))}"


def _seeded_chat(vllm_server: Vllm, tmp_path, name: str, *extra: str):
    prefix = tmp_path / name
    res = run_locust(["-f", CHAT, "--host", vllm_server.url, "--headless", "-u", "2", "-r", "2", "-t", "3s",
                      "--csv", str(prefix), "--seed", "9", "--input-tokens", "200-400", "--output-tokens", "4",
                      "--ignore-eos", "--stop-timeout", "30", "--model", vllm_server.model, *extra], tmp_path,
                     timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    assert set(rows["status"]) == {"ok"} and len(rows) >= 4
    return rows, res.stderr


def test_reset_cache_vllm_makes_a_seeded_repeat_find_nothing_cached(vllm_server: Vllm, tmp_path):
    _seeded_chat(vllm_server, tmp_path, "first")
    reset, said = _seeded_chat(vllm_server, tmp_path, "reset", "--reset-cache", "vllm")
    assert "vllm prefix cache reset (POST /reset_prefix_cache" in said
    warm, _ = _seeded_chat(vllm_server, tmp_path, "warm")  # the same repeat, no reset: the previous run's prompts
    def share(rows) -> float:
        return rows["cached_tokens"].sum() / rows["prompt_tokens"].sum()

    # the same prompts as the run before: none found after the reset, many found without it (0.5 seen:
    # those past the previous run's count, and any a user drew in another order, are new)
    assert share(reset) < 0.05, reset[["start_time", "prompt_tokens", "cached_tokens"]]
    assert share(warm) > 0.25, warm[["start_time", "prompt_tokens", "cached_tokens"]]
