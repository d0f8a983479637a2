"""A fleet behind LiteLLM's real proxy (PyPI ``litellm[proxy]==1.108.7`` in its own venv under
$LLMLOAD_CACHE, ``make router-deps``): two mock replicas, RAG with 8 shared prefixes, the
``affinity`` policy (LiteLLM's ``session_affinity`` pins, keyed by llmload's
X-Llmload-Session-Id, which carries the prefix for requests outside a session). LiteLLM pins each
key to the replica its first request drew, so every replica sees its own prefixes only: each
replica's prefix cache (4 of the 8, as in tests/e2e/test_fleet_sweep.py) then holds what it is
sent, where one replica alone hits half its requests."""

from __future__ import annotations

import os

import pytest

from llmload.sweep.fleet.litellm import wait_installed
from tests.e2e.test_fleet_sweep import HIT_SHARE, RAG, RAG_MOCK, _mock
from tests.support.fleet_runs import fleet_cell, processes_under, run_sweep
from tests.support.second_reading import measured_twice

pytestmark = pytest.mark.prepared_by("litellm")  # make test installs the proxy beside the tests


def _installed() -> None:
    problem = wait_installed()  # make test installs it beside the tests (scripts/test_suite.py)
    if problem and os.environ.get("CI") == "true":
        pytest.fail(problem, pytrace=False)  # make test installs it: missing in CI is a broken setup
    if problem:
        pytest.skip(problem)


def test_litellm_session_affinity_keeps_each_replicas_prefixes(tmp_path):
    _installed()
    plan = f"""\
slo: [ttft_p95_ms=60000]  # what is checked is where requests go; the step only has to count
deployments:
  mock:
    serve: "{_mock(tmp_path, RAG_MOCK)}"
    replicas: [2]
    router: litellm
    policy: [affinity]
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  rag: rag8.yaml
load: {{steps: [1], step_seconds: 8, warmup_s: 2}}
"""
    # LiteLLM pins each of the 8 keys to the replica its first request drew, at random: all 8 on one
    # replica is a fair draw (2 in 256; seen once, {'1': 1.0, '0': 0.0}), and then one replica serves
    # everything. That draw is LiteLLM's, not llmload's: a second sweep (a new proxy, new draws) then.
    def measure(work):
        (work / "rag8.yaml").write_text(RAG)
        done, result = run_sweep(work, plan.replace(str(tmp_path), str(work)), timeout=400)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        cell = fleet_cell(result, 2, "affinity")
        assert cell["fleet"]["router"] == "litellm" and set(cell["fleet"]["routing_check"]["reached"]) == {"0", "1"}
        e = result["fleets"]["rag"]["mock"]["policies"]["affinity"]["k"]["2"]
        # without a capacity step the fleet entry has no replica view (a busy machine once left none)
        assert "share" in e, [{k: s.get(k) for k in ("level", "thin", "slo_met", "ok", "errors")}
                              for s in cell["steps"]]
        return cell, e

    (cell, e), work = measured_twice(tmp_path, measure, lambda r: None if all(s > 0.1 for s in r[1]["share"].values())
                                     else f"LiteLLM pinned every key to one replica: {r[1]['share']}")
    assert all(s > 0.1 for s in e["share"].values()), e["share"]  # both replicas serve
    # pinned keys: a replica sees m of the 8 prefixes and hits min(1, 4/m) of its requests; over the
    # two, at least 4 of every 8 hit, and whichever split LiteLLM drew, better than one replica's 0.5
    assert e["fleet_hit_rate"] > 0.5 * HIT_SHARE + 0.15, e
    config = (work / "out" / "cells" / cell["id"] / "router" / "litellm.yaml").read_text()
    assert '"optional_pre_call_checks": [\n      "session_affinity"' in config
    assert not processes_under(tmp_path)
