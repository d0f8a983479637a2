"""How many streamed tokens/s `llmload mock` sustains on one core with its timing intact.

The mock runs on CPU 0 with a batching profile whose steps take a fixed 10 ms (so N running
sequences should stream N × 100 tokens/s); llmload's fast transport drives it from CPU 1 with
N closed-loop streams. For each N it prints the modelled and achieved token rates, how late the
mock started its engine steps (`llmload_mock:event_lag_seconds`) and how long writing one
step's tokens took (`llmload_mock:write_span_seconds`). The mock "sustains" a rate when it
achieves ≥ 95 % of the model with ≤ 1 % of steps more than 1 ms late.

    python benchmarks/mock_capacity.py
    python benchmarks/mock_capacity.py --streams 100,200,400 --seconds 6
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402

import gevent  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.metrics.record import RequestMeta  # noqa: E402
from llmload.mock.launch import port_of, start_mock_process, stop_mock_process  # noqa: E402
from llmload.transport import FastTransport  # noqa: E402
from llmload.wire.protocol import chat_body, encode_body  # noqa: E402

STEP_MS = 10.0
OUTPUT_TOKENS = 400


def scrape(port: int) -> dict[str, float]:
    """Lag buckets by their bound, plus the generated-token counter as "tokens"."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {m.group(1): float(m.group(2))
           for m in re.finditer(r'llmload_mock:event_lag_seconds_bucket\{[^}]*le="([^"]+)"\} (\S+)', text)}
    for m in re.finditer(r'llmload_mock:write_span_seconds_bucket\{[^}]*le="([^"]+)"\} (\S+)', text):
        out["w" + m.group(1)] = float(m.group(2))
    out["tokens"] = float(re.search(r"vllm:generation_tokens_total\{[^}]*\} (\S+)", text).group(1))
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(streams: int, seconds: float) -> dict:
    proc, url = start_mock_process(["--profile", "fast", "--step-base-ms", str(STEP_MS), "--step-per-seq-ms", "0",
                                    "--step-per-prefill-token-ms", "0", "--api-overhead-ms", "0",
                                    "--max-num-seqs", str(streams)], cpu=0, cwd=ROOT)
    port = port_of(url)
    try:
        body = encode_body(chat_body("m", [{"role": "user", "content": "hello " * 32}], OUTPUT_TOKENS,
                                     extra={"ignore_eos": True}))
        transports = [FastTransport(f"http://127.0.0.1:{port}", "/v1/chat/completions", timeout=60)
                      for _ in range(streams)]
        gevent.joinall([gevent.spawn(t.connect) for t in transports])
        stop_at = time.monotonic() + 2.0 + seconds  # 2 s to fill the engine, then measure

        def user(t: FastTransport) -> None:
            for i in range(1_000_000):
                if time.monotonic() >= stop_at:
                    return
                t.stream(body, RequestMeta(f"c{id(t)}-{i}", 0.0, "cap"))

        users = [gevent.spawn(user, t) for t in transports]
        gevent.sleep(2.0)
        before, cpu0, t0 = scrape(port), cpu_seconds(proc.pid), time.monotonic()
        gevent.sleep(seconds)
        after, cpu1, t1 = scrape(port), cpu_seconds(proc.pid), time.monotonic()
        gevent.killall(users, timeout=10)
        wall = t1 - t0
        cpu = cpu1 - cpu0
    finally:
        stop_mock_process(proc)
    steps = after["+Inf"] - before.get("+Inf", 0.0)
    late = steps - (after["0.001"] - before.get("0.001", 0.0))
    within_half = after["0.0005"] - before.get("0.0005", 0.0)
    writes = after["w+Inf"] - before.get("w+Inf", 0.0)
    slow_writes = writes - (after["w0.001"] - before.get("w0.001", 0.0))
    tps = (after["tokens"] - before["tokens"]) / wall
    return {"streams": streams, "model_tps": streams * 1000.0 / STEP_MS, "tps": tps,
            "late_share": late / steps if steps else float("nan"), "half_ms_share": within_half / steps if steps else 0,
            "cpu": cpu / wall, "slow_write_share": slow_writes / writes if writes else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="50,100,200,300,400")
    ap.add_argument("--seconds", type=float, default=6.0)
    args = ap.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    print(f"{'streams':>8}{'model tok/s':>13}{'achieved':>10}{'ratio':>7}{'steps >1ms late':>17}"
          f"{'steps <0.5ms':>14}{'writes >1ms':>13}{'mock CPU':>10}")
    best = 0.0
    for n in (int(x) for x in args.streams.split(",")):
        r = run(n, args.seconds)
        ok = r["tps"] >= 0.95 * r["model_tps"] and r["late_share"] <= 0.01
        if ok:
            best = max(best, r["tps"])
        print(f"{n:>8}{r['model_tps']:>13.0f}{r['tps']:>10.0f}{r['tps'] / r['model_tps']:>7.2f}"
              f"{r['late_share'] * 100:>16.2f}%{r['half_ms_share'] * 100:>13.1f}%"
              f"{r['slow_write_share'] * 100:>12.1f}%{r['cpu'] * 100:>9.0f}%"
              f"{'' if ok else '  (not sustained)'}", flush=True)
    print(f"sustained: {best:.0f} tokens/s on one core (achieved ≥ 95 % of the model, ≤ 1 % of steps > 1 ms late)")


if __name__ == "__main__":
    main()
