"""Fleets in `llmload sweep` against mock replicas behind a real nginx: the known answers.

* chat, no shared prefix, 4 replicas round-robin: η within 10 % of 1, every replica a quarter;
* RAG, 8 shared prefixes, each replica's prefix cache the size of 4 of them: the hit rate each
  policy must reach follows from the mock's settings (below), and the measured one holds to it;
  affinity's η is higher than round-robin's and sweep.md says so;
* hash affinity with one heavy key: its replica does ~93 % of the work (imbalance ~1.86);
* a replica killed mid-run: the report names it from its metrics, counts the failed requests,
  and the step's verdict says the fleet lost a member;
* a replica that answers 500 through the router fails the cell with one line naming it;
* SIGTERM during a fleet cell; and after every sweep, no replica or router is left running.

The RAG answer, derived. The mock's prefix cache is an LRU of ``kv_capacity_tokens // 16``
blocks keyed by the whole prefix (docs/mock.md). With prefixes of 512 words (32 blocks), an
8-word question (no full block of its own) and ``--kv-capacity-tokens 2048`` (128 blocks), a
replica's cache holds exactly 4 prefixes, and only prefixes. Under LRU with requests drawn
independently and uniformly over N prefixes, the cache holds c distinct ones and the next
request is for one of them with probability c/N, whatever the order (the draw does not depend on
the past). So a replica that sees all 8 (one replica alone, or any replica under round-robin,
which routes independently of the prefix) hits 4/8 of its requests; under hash affinity a
replica sees only the m prefixes nginx hashes to it and hits min(1, 4/m). A hit is 512 cached
tokens of a 520-token prompt (the last prompt token is always recomputed), so the token hit
rate is 0.5 × 512/520 = 0.492 and min(1, 4/m) × 512/520. (With a cache that held all 8 on every
replica, round-robin and affinity would differ only by the first miss of each prefix on each
replica: 8 × K cold misses against 8, hidden by the warm-up.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from llmload.sweep.fleet.nginx import hash_replica
from tests.support.fleet_runs import CLI, MOCK, by_index, env, fleet_cell, processes_under, run_sweep, write_plan
from tests.support.processes import ROOT

PREFIX_WORDS, QUESTION_WORDS = 512, 8
HIT_SHARE = PREFIX_WORDS / (PREFIX_WORDS + QUESTION_WORDS)


def _mock(tmp_path, flags: str) -> str:
    return f"{MOCK} {flags} --log {tmp_path}/replica-{{port}}.jsonl"


def _served(tmp_path, cell: dict) -> list[int]:
    """Requests each replica of a cell finished, from the mocks' own logs (one line per request)."""
    out = []
    for r in cell["fleet"]["replicas"]:
        with open(tmp_path / f"replica-{r['url'].rsplit(':', 1)[1]}.jsonl") as f:
            out.append(sum(1 for _ in f))
    return out


# 4 slots per replica, 2 users per replica at most: routing that sent everything to one replica
# would queue it (8 users on 4 slots: half the throughput)
CHAT_MOCK = "--profile vllm-v1 --max-num-seqs 4 --step-base-ms 10 --step-per-seq-ms 0.1 --api-overhead-ms 1"


def test_chat_on_four_round_robin_replicas_scales_within_ten_percent_of_linear(tmp_path):
    plan = f"""\
slo: [ttft_p95_ms=1000]
target_rps: 100
deployments:
  mock:
    serve: "{_mock(tmp_path, CHAT_MOCK)}"
    replicas: [1, 4]
    policy: round_robin
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  chat: {{input_tokens: 40, output_tokens: 16}}
load: {{steps: [1, 2], step_seconds: 5, warmup_s: 1}}
"""
    done, result = run_sweep(tmp_path, plan)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fleet = result["fleets"]["chat"]["mock"]
    four = fleet["policies"]["round_robin"]["k"]["4"]
    assert abs(four["eta"] - 1.0) <= 0.10, four
    lo, hi = four["eta_interval"]
    assert lo is not None and hi is not None and lo <= four["eta"] <= hi
    assert four["share_by"] == "requests" and four["imbalance"] < 1.15, four
    assert all(abs(s - 0.25) < 0.05 for s in four["share"].values()), four["share"]
    cell = fleet_cell(result, 4, "round_robin")
    # the mocks' own logs agree with their /metrics: a quarter each
    served = _served(tmp_path, cell)
    assert min(served) > 0.2 * sum(served), served
    assert cell["fleet"]["routing_check"]["reached"].keys() == {"0", "1", "2", "3"}
    assert "Fleet: mock behind nginx, chat" in (tmp_path / "out" / "sweep.md").read_text()
    assert not processes_under(tmp_path)


RAG = f"""\
seed: 5
workloads:
  rag:
    input_tokens: {QUESTION_WORDS}
    output_tokens: 16
    ignore_eos: true
    prefix:
      groups:
        - {{name: doc, tokens: {PREFIX_WORDS}, count: 8, popularity: uniform}}
"""
# 2,048 tokens of KV: 4 prefixes in the cache (and 3 requests running at once); a miss's prefill
# (520 tokens × 0.3 ms) costs over twice its 16 decode steps, so cache hits buy throughput. At 0.15 ms
# (docs/fleet.md's example) a busy host's delays, which every request pays, once narrowed the
# policies' η apart (1.47 against 0.89) less than their intervals' widths from 6-s steps.
RAG_MOCK = ("--profile vllm-v1 --kv-capacity-tokens 2048 --max-num-seqs 8 --max-num-batched-tokens 2048 "
            "--step-base-ms 4 --step-per-seq-ms 0.1 --step-per-prefill-token-ms 0.3 --api-overhead-ms 1")


def test_rag_affinity_keeps_each_replicas_prefixes_round_robin_scatters_them(tmp_path):
    (tmp_path / "rag8.yaml").write_text(RAG)
    plan = f"""\
slo: [ttft_p95_ms=2000]
target_rps: 60
deployments:
  mock:
    serve: "{_mock(tmp_path, RAG_MOCK)}"
    replicas: [1, 2]
    policy: [round_robin, affinity]
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  rag: rag8.yaml
load: {{steps: [1, 2], step_seconds: 8, warmup_s: 1.5}}
"""
    done, result = run_sweep(tmp_path, plan)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fleet = result["fleets"]["rag"]["mock"]
    one = fleet["one_replica"]
    # each request hits or misses its 512-word prefix: over the ~60 requests of a step, 3 standard
    # deviations of a 0.5 hit rate are 0.19 (0.08 missed once on a loaded machine: a draw, not a bug)
    assert abs(one["fleet_hit_rate"] - 0.5 * HIT_SHARE) < 0.19, one
    rr = fleet["policies"]["round_robin"]["k"]["2"]
    aff = fleet["policies"]["affinity"]["k"]["2"]
    # the derived hit rates: 4 of 8 under round-robin; min(1, 4/m) under affinity, m from nginx's hash
    keys = [f"prefix-rag_doc{i}" for i in range(8)]
    m = [sum(1 for k in keys if hash_replica(k, 2) == r) for r in range(2)]
    # a few hundred requests per replica, and an LRU's hits come in runs: ±0.15 per replica, ±0.08 pooled
    assert abs(rr["fleet_hit_rate"] - 0.5 * HIT_SHARE) < 0.19, rr
    for r in ("0", "1"):
        assert abs(rr["hit_rate"][r] - 0.5 * HIT_SHARE) < 0.15, (r, rr["hit_rate"])
        assert abs(aff["hit_rate"][r] - min(1.0, 4 / m[int(r)]) * HIT_SHARE) < 0.06, (r, m, aff["hit_rate"])
    assert max(rr["hit_rate"].values()) < min(aff["hit_rate"].values()), (rr["hit_rate"], aff["hit_rate"])
    assert aff["eta"] > rr["eta"] + 0.1, (aff["eta"], rr["eta"])
    assert aff["eta_interval"][0] > rr["eta_interval"][1]
    assert aff["vs_one_replica"] > 0.3 and abs(rr["vs_one_replica"]) < 0.2
    # each request went where the hash says: the mocks' logs hold only their own prefixes
    cell = fleet_cell(result, 2, "affinity")
    assert set(by_index(cell, cell["steps"][-1]["replicas"])) == {0, 1}
    said = (tmp_path / "out" / "sweep.md").read_text()
    assert "×2: affinity has the highest η" in said and "the intervals do not overlap" in said, said
    assert fleet["cheapest_policy"] == "affinity"
    assert result["best"]["rag"]["deployment"] == "mock behind nginx (affinity)"
    assert not processes_under(tmp_path)


HEAVY = """\
seed: 9
workloads:
  heavy:
    input_tokens: 8
    output_tokens: 16
    ignore_eos: true
    prefix:
      groups:
        - {name: big, tokens: 32, count: 1, weight: 6}
        - {name: small, tokens: 32, count: 6, weight: 1}
"""


def test_hash_affinity_with_one_heavy_key_overloads_its_replica(tmp_path):
    (tmp_path / "heavy.yaml").write_text(HEAVY)
    plan = f"""\
slo: [ttft_p95_ms=5000]
deployments:
  mock:
    serve: "{_mock(tmp_path, '--profile vllm-v1 --max-num-seqs 2 --step-base-ms 8 --api-overhead-ms 1')}"
    replicas: [2]
    policy: affinity
    affinity_key: prefix
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  heavy: heavy.yaml
load: {{steps: [3], step_seconds: 6, warmup_s: 1}}
"""
    done, result = run_sweep(tmp_path, plan)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    e = result["fleets"]["heavy"]["mock"]["policies"]["affinity"]["k"]["2"]
    heavy_at = hash_replica("prefix-heavy_big0", 2)
    light_there = sum(1 for i in range(6) if hash_replica(f"prefix-heavy_small{i}", 2) == heavy_at)
    share = 6 / 7 + light_there / 42  # the heavy key's 6/7 of the draws, plus the light keys hashed with it
    # Of the requests served, the heavy replica's share is below its share of the draws: closed-loop users
    # whose request waits in its queue send less often than those served at once by the other (a queue of
    # 3.4 on a busy machine: 0.866 served against 0.929 drawn); round-robin would give 0.5.
    assert share - 0.15 < e["share"][str(heavy_at)] < share + 0.06, (e["share"], share)
    assert abs(e["imbalance"] - 2 * e["share"][str(heavy_at)]) < 0.01, e  # max over mean of two
    other = str(1 - heavy_at)
    assert e["waiting_mean"][str(heavy_at)] > e["waiting_mean"][other] + 0.5, e["waiting_mean"]
    assert f"imbalance {e['imbalance']:.2f}" in (tmp_path / "out" / "sweep.md").read_text()
    assert not processes_under(tmp_path)


def _wait_for(path, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def _wait_for_users(path, users: int, timeout: float = 60.0) -> None:
    """Until the run's requests CSV (flushed as it goes) has a request sent at ``users`` users."""
    import csv

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            with open(path, newline="") as f:
                if any(row.get("users") == str(users) for row in csv.DictReader(f)):
                    return
        time.sleep(0.2)
    raise AssertionError(f"{path}: no request at {users} users within {timeout:g} s")


def test_a_replica_killed_mid_run_is_named_counted_and_its_steps_are_never_capacity(tmp_path):
    plan = f"""\
slo: [ttft_p95_ms=2000]
deployments:
  mock:
    serve: "{_mock(tmp_path, '--profile vllm-v1 --step-base-ms 10 --api-overhead-ms 1')}"
    replicas: [2]
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  chat: {{input_tokens: 40, output_tokens: 16}}
load: {{steps: [2, 3], step_seconds: 5, warmup_s: 1}}
"""
    path = write_plan(tmp_path, plan)
    sweep = subprocess.Popen([*CLI, "sweep", str(path), "--out", str(tmp_path / "out"), "--no-archive"], cwd=ROOT,
                             env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cell_dir = tmp_path / "out" / "cells" / "mock-k2-round_robin.chat.r1"
        fleet = _wait_for(cell_dir / "fleet.json")
        _wait_for_users(cell_dir / "run_requests.csv", 6)  # the second step (3 users per replica) began
        time.sleep(1.5)  # past its warm-up, streams in flight on both replicas
        victim = fleet["replicas"][1]
        os.killpg(victim["pid"], signal.SIGKILL)
        out, _ = sweep.communicate(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    result = json.loads((tmp_path / "out" / "sweep.json").read_text())
    cell = result["cells"][0]
    assert cell["status"] == "done", out[-3000:]
    lost = cell["replica_metrics"]["lost"]
    assert [m["endpoint"] for m in lost] == [victim["metrics_url"]], lost
    assert lost[0]["failed_requests"] >= 1  # the streams it was sending were cut
    assert [p["index"] for p in cell["fleet"]["processes_lost"]] == [1]
    second = cell["steps"][-1]
    assert second["fleet_lost"] == [victim["metrics_url"]] and "fleet lost a member" in second["verdict"]
    assert cell["steps"][0].get("fleet_lost") is None and cell["capacity"]["users"] == 4  # the first step only
    report = json.loads((cell_dir / "report.json").read_text())
    assert "the fleet lost a member" in " ".join(report["warnings"])
    said = (tmp_path / "out" / "sweep.md").read_text()
    assert f"the fleet lost replica 1 ({victim['metrics_url']})" in said
    assert not processes_under(tmp_path)


def test_a_replica_that_fails_through_the_router_fails_its_cell_with_one_line_and_leaves_nothing(tmp_path):
    plan = f"""\
deployments:
  mock:
    serve: "{_mock(tmp_path, '--profile fast --fault 500={replica}')}"
    replicas: [2]
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  chat: {{input_tokens: 10, output_tokens: 4}}
load: {{steps: [1], step_seconds: 2, warmup_s: 0.5}}
"""
    done, result = run_sweep(tmp_path, plan, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    cell = result["cells"][0]
    assert cell["status"] == "failed"
    first = cell["error"].splitlines()[0]
    assert first.startswith("replica 1 (http://127.0.0.1:") and "did not answer through nginx" in first, first
    assert "replica 1: HTTP 500" in first
    assert not processes_under(tmp_path)


def test_sigterm_during_a_fleet_cell_stops_router_and_replicas(tmp_path):
    plan = f"""\
deployments:
  mock:
    serve: "{_mock(tmp_path, '--profile fast')}"
    replicas: [2]
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  chat: {{input_tokens: 10, output_tokens: 4}}
load: {{steps: [1], step_seconds: 30, warmup_s: 1}}
"""
    path = write_plan(tmp_path, plan)
    sweep = subprocess.Popen([*CLI, "sweep", str(path), "--out", str(tmp_path / "out"), "--no-archive"], cwd=ROOT,
                             env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(tmp_path / "out" / "cells" / "mock-k2-round_robin.chat.r1" / "fleet.json")
        assert processes_under(tmp_path)  # the fleet runs: the check below can see it
        time.sleep(1.0)
        sweep.send_signal(signal.SIGTERM)
        sweep.communicate(timeout=90)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 128 + signal.SIGTERM
    assert not processes_under(tmp_path)


def test_litellm_not_installed_is_one_line_with_the_pip_command(tmp_path):
    plan = f"""\
deployments:
  mock: {{serve: "{MOCK}", replicas: [2], router: litellm, gpus: 1, gpu_hourly_usd: 1.0}}
workloads:
  chat: {{input_tokens: 10, output_tokens: 4}}
load: {{steps: [1], step_seconds: 2, warmup_s: 0.5}}
"""
    done, result = run_sweep(tmp_path, plan, timeout=60, extra_env={"LLMLOAD_CACHE": str(tmp_path / "empty-cache")})
    assert done.returncode == 2 and result is None
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "deployments.mock.router: LiteLLM 1.108.7 is not installed" in lines[0]
    assert "pip install 'litellm[proxy]==1.108.7'" in lines[0]
