"""Client overhead and timing accuracy of the two transports, against `llmload mock`.

Prints, per transport and number of concurrent streams in one process: CPU µs per streamed
chunk, chunks per CPU-second, and the timing error against the mock's ground-truth log (both
clocks are this machine's CLOCK_MONOTONIC):

* TTFT error: the client's timestamp of the first token (t0 + TTFT) − the mock's send time of
  it, i.e. how late the client notices the token. (Time the mock takes to read a request is
  real latency, not client error, so it is not counted here.)
* TPOT error: |client TPOT − (last − first token send time) / (tokens − 1)|.

The mock runs in its own process on CPU 0 (fixed profile), the client here on CPU 1.

    python benchmarks/client_overhead.py                      # the full table
    python benchmarks/client_overhead.py --streams 64 --transports fast --seconds 5
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.metrics.record import RequestMeta  # noqa: E402
from llmload.mock.launch import port_of, start_mock_process, stop_mock_process  # noqa: E402
from llmload.transport import FastTransport, OpenAITransport  # noqa: E402
from llmload.wire.protocol import chat_body, encode_body  # noqa: E402
from llmload.workload.text import words  # noqa: E402


def run(transport_cls, port: int, streams: int, seconds: float, output_tokens: int) -> dict:
    import random

    rng = random.Random(1)
    prompt = words(rng, 64)
    body = encode_body(chat_body("mock", [{"role": "user", "content": prompt}], output_tokens,
                                 extra={"ignore_eos": True}))
    records = []
    counter = iter(range(10**9))
    # Connect everyone first (creating hundreds of SDK clients takes seconds), then time.
    transports = [transport_cls(f"http://127.0.0.1:{port}", "/v1/chat/completions", timeout=120)
                  for _ in range(streams)]
    gevent.joinall([gevent.spawn(t.connect) for t in transports], timeout=120)
    deadline = time.monotonic() + seconds

    def user(t) -> None:
        for _ in range(100_000):
            if time.monotonic() >= deadline:
                break
            meta = RequestMeta(request_id=f"b{port}-{next(counter)}", start_time=0.0, scenario="bench")
            records.append(t.stream(body, meta))
        t.close()

    cpu0, wall0 = time.process_time(), time.monotonic()
    gevent.joinall([gevent.spawn(user, t) for t in transports], timeout=seconds + 300)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    chunks = sum((r.completion_tokens or 0) for r in records)
    return {"records": records, "cpu": cpu, "wall": wall, "chunks": chunks}


def p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def truth(log_path: str) -> dict[str, dict]:
    out = {}
    with open(log_path) as f:
        for line in f:
            e = json.loads(line)
            out[e["request_id"]] = e
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="1,64,256,1024")
    ap.add_argument("--transports", default="fast,openai")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--output-tokens", type=int, default=200)
    ap.add_argument("--openai-max-streams", type=int, default=256,
                    help="skip larger stream counts for the SDK (it saturates a core long before)")
    args = ap.parse_args()
    if os.cpu_count() and os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    classes = {"fast": FastTransport, "openai": OpenAITransport}
    print(f"{'transport':<9}{'streams':>8}{'chunks':>9}{'tok/s':>9}{'CPU µs/chunk':>14}{'chunks/CPU-s':>14}"
          f"{'TTFT err p50':>14}{'p99':>8}{'TPOT err p99':>14}{'ok':>7}")
    for name in args.transports.split(","):
        for streams in (int(s) for s in args.streams.split(",")):
            if name == "openai" and streams > args.openai_max_streams:
                continue
            # Keep the mock (one core) under ~15k tokens/s so the server is never the limit.
            itl = max(5.0, streams / 15.0)
            with tempfile.TemporaryDirectory() as d:
                log_path = os.path.join(d, "truth.jsonl")
                proc, url = start_mock_process(["--profile", "fixed", "--ttft-ms", "50", "--itl-ms", str(itl),
                                                "--log", log_path], cpu=0, cwd=ROOT)
                port = port_of(url)
                try:
                    r = run(classes[name], port, streams, args.seconds, args.output_tokens)
                finally:
                    stop_mock_process(proc)
                t = truth(log_path)
            ok = [x for x in r["records"] if x.ok]
            ttft_err, tpot_err = [], []
            for rec in ok:
                e = t.get(rec.meta.request_id)
                if not e or e["first_token_mono"] is None:
                    continue
                ttft_err.append((rec.t0 + rec.ttft_ms / 1000 - e["first_token_mono"]) * 1000)
                if e["tokens_sent"] > 1 and rec.tpot_ms is not None:
                    true_tpot = (e["last_token_mono"] - e["first_token_mono"]) * 1000 / (e["tokens_sent"] - 1)
                    tpot_err.append(abs(rec.tpot_ms - true_tpot))
            us = r["cpu"] / max(r["chunks"], 1) * 1e6
            print(f"{name:<9}{streams:>8}{r['chunks']:>9}{r['chunks'] / r['wall']:>9.0f}{us:>14.1f}"
                  f"{r['chunks'] / max(r['cpu'], 1e-9):>14.0f}{p(ttft_err, 50):>14.3f}{p(ttft_err, 99):>8.3f}"
                  f"{p(tpot_err, 99):>14.4f}{len(ok):>7}", flush=True)


if __name__ == "__main__":
    main()
