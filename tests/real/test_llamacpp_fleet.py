"""Two real llama.cpp replicas behind a real nginx, RAG with 4 shared prefixes: the cached share
of each replica's prompts under round-robin against hash affinity (real prefix caches).

Each llama-server has one slot and no host-memory prompt cache (``-np 1 --cache-ram 0``): its
cache is the last prompt its slot processed, so a request reuses the shared prefix when the one
before it on that replica carried the same one. Round-robin sends each replica a uniform draw of
the 4 prefixes (about 1 in 4 reuses); affinity hashes each prefix to one replica (2 and 2 here,
from nginx's hash), so a replica sees 2 of them (about 1 in 2). Read from each replica's own
``llamacpp:prompt_tokens_cached`` against its prompt tokens."""

from __future__ import annotations

import pytest

from llmload.sweep.fleet.nginx import hash_replica
from tests.support.fleet_runs import by_index, fleet_cell, processes_under, run_sweep
from tests.support.llamacpp import tiny_model_fixture  # noqa: F401  (the fixture)
from tests.support.llamacpp_binary import llama_binary_fixture  # noqa: F401  (the fixture)

# Alone (the timing tier): two one-thread replicas beside the side tier's tests at load average 7 left one
# replica serving 99 % of the requests (the other slower than nginx's timeouts): the shares are then no
# test of the routing.
pytestmark = pytest.mark.timing

SERVE = ("{binary} -m {model} --host 127.0.0.1 --port {{port}} --no-webui -np 1 -c 4096 --threads 1 --metrics "
         "--cache-prompt --cache-ram 0 --alias tiny-llama")
RAG4 = """\
seed: 3
workloads:
  rag:
    input_tokens: 8
    output_tokens: 4
    ignore_eos: true
    prefix:
      groups:
        - {name: doc, tokens: 300, count: 4, popularity: uniform}
"""


def test_affinity_doubles_each_llamacpp_replicas_cached_share_against_round_robin(tmp_path, llama_binary,
                                                                                  tiny_model):
    (tmp_path / "rag4.yaml").write_text(RAG4)
    assert sorted(hash_replica(f"prefix-rag_doc{i}", 2) for i in range(4)) == [0, 0, 1, 1]  # 2 and 2
    plan = f"""\
slo: [ttft_p95_ms=5000]
deployments:
  llama:
    serve: "{SERVE.format(binary=llama_binary, model=tiny_model)}"
    replicas: [2]
    policy: [round_robin, affinity]
    health: /health
    start_timeout_s: 60
    gpus: 1
    gpu_hourly_usd: 1.0
workloads:
  rag: rag4.yaml
load: {{steps: [1], step_seconds: 10, warmup_s: 2}}
"""
    done, result = run_sweep(tmp_path, plan, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rates = {}
    for policy in ("round_robin", "affinity"):
        cell = fleet_cell(result, 2, policy)
        over = cell["replica_metrics"]["over_steps"]
        assert over["share_by"] == "output_tokens"  # llama.cpp counts no finished requests
        rates[policy] = by_index(cell, {e: p["prefix_cache_hit_rate"] for e, p in over["replicas"].items()})
        assert all(p["share"] > 0.25 for p in over["replicas"].values()), over  # both replicas served
    assert max(rates["round_robin"].values()) < min(rates["affinity"].values()), rates
    # about 1 in 2 against 1 in 4; over a short step's few dozen requests a round-robin replica drew 0.34 once
    assert min(rates["affinity"].values()) > 1.25 * max(rates["round_robin"].values()), rates
    print("cached share per replica:", rates)
    assert not processes_under(tmp_path)
