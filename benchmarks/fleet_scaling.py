"""Fleet scaling on this machine: the RAG example of docs/fleet.md, measured with longer steps than
the tests' known answers. Writes the plan and its scenario into --dir, runs `llmload sweep` on it
(mock replicas behind Debian's nginx: 1, 2 and 4 replicas × round_robin, least_conn, affinity),
and prints per policy and K: capacity (req/s, interval), η (interval), imbalance, fleet hit rate,
and each policy's plan against K × one.

Each mock replica's prefix cache holds 4 of the workload's 8 shared prefixes (docs/fleet.md says
why); a miss costs a 520-token prefill.

    python benchmarks/fleet_scaling.py                         # ~4 min, with both cores to itself
    python benchmarks/fleet_scaling.py --dir /tmp/fleetdoc --step-seconds 10 --replicas 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

SCENARIO = """\
# RAG: 8 shared 512-word documents, uniform; an 8-word question; 16 output tokens
seed: 5
workloads:
  rag:
    input_tokens: 8
    output_tokens: 16
    ignore_eos: true
    prefix:
      groups:
        - {name: doc, tokens: 512, count: 8, popularity: uniform}
"""

FLAGS = ("--profile vllm-v1 --kv-capacity-tokens 2048 --max-num-seqs 8 --max-num-batched-tokens 2048 --step-base-ms 4 "
         "--step-per-seq-ms 0.1 --step-per-prefill-token-ms 0.15 --api-overhead-ms 1")
PLAN = """\
slo: [ttft_p95_ms=300, tpot_p95_ms=40]
target_rps: 60
headroom: 0.3
deployments:
  mock:
    serve: "{mock} --port {{port}} {flags}"
    replicas: [{replicas}]
    router: nginx
    policy: [round_robin, least_conn, affinity]
    gpus: 1
    gpu_hourly_usd: 2.0
workloads:
  rag: rag8.yaml
load: {{steps: [1, 2, 3], step_seconds: {step_seconds:g}, warmup_s: 2}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/fleetdoc")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--step-seconds", type=float, default=8.0)
    ap.add_argument("--mock", default=f"{sys.executable} -m llmload.cli mock",
                    help="how the plan starts a replica (docs/fleet.md: `llmload mock`)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, "rag8.yaml"), "w") as f:
        f.write(SCENARIO)
    with open(os.path.join(args.dir, "plan.yaml"), "w") as f:
        f.write(PLAN.format(mock=args.mock, flags=FLAGS, replicas=", ".join(args.replicas.split(",")),
                            step_seconds=args.step_seconds))
    out = os.path.join(args.dir, "out")
    subprocess.run(["rm", "-rf", out], check=True)
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "llmload.cli", "sweep", "plan.yaml", "--out", "out", "--no-archive"],
                          cwd=args.dir, env={**os.environ, "PYTHONPATH": ROOT})
    took = time.monotonic() - t0
    with open(os.path.join(out, "sweep.json")) as f:
        result = json.load(f)
    print(f"\nsweep took {took:.0f} s, exit {done.returncode}")
    for workload, bases in result["fleets"].items():
        for base, fl in bases.items():
            one = fl["one_replica"] or {}
            print(f"{workload} / {base}: one replica {one.get('capacity_rps')} req/s {one.get('capacity_interval')}, "
                  f"hit rate {one.get('fleet_hit_rate')}")
            for policy, v in fl["policies"].items():
                for k, e in v["k"].items():
                    print(f"  ×{k} {policy:12s} cap {e.get('capacity_rps')} {e.get('capacity_interval')}  η {e['eta']} "
                          f"{e['eta_interval']}  imbalance {e.get('imbalance')}  hit {e.get('fleet_hit_rate')} "
                          f"per replica {e.get('hit_rate')}  replicas for target {e.get('replicas')}")
                print(f"  {policy}: plan {v['plan']}")
            print(f"  K × one: {fl['linear_plan']}")
            for line in fl["verdicts"]:
                print(f"  - {line}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
