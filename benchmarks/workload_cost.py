"""µs to generate one request (and encode its JSON body) for each shipped scenario.

Generating a request must cost well under streaming it (≈13 µs per streamed token on the fast
transport, so a 128-token reply costs ~1.7 ms of client CPU). Prints per scenario workload the
mean µs per request over many draws, including a fixed 32k-token long-context prompt.

    python benchmarks/workload_cost.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from llmload.wire.protocol import encode_body  # noqa: E402
from llmload.workload.dataset import load_dataset  # noqa: E402
from llmload.workload.file.scenario import load_scenario, parse_scenario  # noqa: E402
from llmload.workload.scenario_workload import ScenarioWorkload  # noqa: E402
from llmload.workload.text import TextSource  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def measure(spec, scenario_seed: int, n: int) -> tuple[float, float]:
    text = TextSource(scenario_seed)
    convs = load_dataset(spec.dataset) if spec.dataset else None
    w = ScenarioWorkload(spec, scenario_seed, user_seed=1, model="m", text=text, conversations=convs)
    for _ in range(20):  # warm: prefix texts, first session
        r = w.next_request()
        w.on_reply(r, "a short reply of a few words", ok=True)
    size = 0
    t = time.perf_counter()
    for _ in range(n):
        r = w.next_request()
        size += len(encode_body(r.body()))
        w.on_reply(r, "a short reply of a few words", ok=True)
    return (time.perf_counter() - t) / n * 1e6, size / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    print(f"{'scenario':<28}{'µs/request':>12}{'body bytes':>12}")
    for name in ("chat", "rag", "long_context", "multi_turn", "mixed", "open_loop"):
        scen = load_scenario(os.path.join(ROOT, "scenarios", f"{name}.yaml"))
        for spec in scen.workloads:
            n = max(50, args.requests // 20) if spec.name == "long_context" else args.requests
            us, size = measure(spec, scen.seed, n)
            print(f"{name + '/' + spec.name:<28}{us:>12.1f}{size:>12.0f}", flush=True)
    fixed = parse_scenario("workloads:\n  long32k:\n    input_tokens: 32000\n    output_tokens: 256\n").workloads[0]
    us, size = measure(fixed, 0, 200)
    print(f"{'32k-token prompt':<28}{us:>12.1f}{size:>12.0f}")


if __name__ == "__main__":
    main()
