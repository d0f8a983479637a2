"""What the real-engine test server can do: llama-server with the tiny random-weight model.

Prints the build's recorded time and size, the server's start time (process start → /health
200), and generated tokens/s with 1 and 4 concurrent streams (4 slots; each stream asks for
``--max-tokens`` tokens, ``--requests`` times), client-side (completion tokens from usage /
wall time) beside the server's ``llamacpp:predicted_tokens_seconds`` gauge.

    python benchmarks/llamacpp_tiny.py
    python benchmarks/llamacpp_tiny.py --max-tokens 256 --requests 3
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
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.metrics.record import OK, RequestMeta  # noqa: E402
from llmload.transport import FastTransport  # noqa: E402
from scripts.llama_server import (  # noqa: E402
    build_dir,
    ensure_llama_server,
    server_args,
    start_llama_server,
    stop_llama_server,
    write_tiny_model,
)


def one_stream(url: str, max_tokens: int, requests: int, tag: str) -> list:
    t = FastTransport(url, "/v1/chat/completions", timeout=120)
    t.connect()
    recs = []
    for i in range(requests):
        body = json.dumps({"model": "tiny-llama", "messages": [{"role": "user", "content": f"story {tag} {i}"}],
                           "max_tokens": max_tokens, "stream": True, "temperature": 0,
                           "stream_options": {"include_usage": True}}).encode()
        recs.append(t.stream(body, RequestMeta(request_id=f"{tag}-{i}", start_time=0.0, scenario="bench")))
    t.close()
    return recs


def gauge(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(f"llamacpp:{name} "):
                return float(line.split()[1])
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--requests", type=int, default=4, help="requests per stream")
    args = ap.parse_args()

    binary = ensure_llama_server()
    info = json.loads((build_dir() / "build.json").read_text())
    print(f"build: {info['total_s']} s (compile {info['compile_s']} s, -j{info['jobs']}), "
          f"binary {binary.stat().st_size / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_model(Path(tmp) / "tiny.gguf")
        for streams in (1, 4):
            t0 = time.perf_counter()
            proc, url = start_llama_server(model, 0, server_args(), binary=binary, log_path=Path(tmp) / "s.log")
            started = time.perf_counter() - t0
            try:
                one_stream(url, 8, 1, "warmup")
                t1 = time.perf_counter()
                jobs = [gevent.spawn(one_stream, url, args.max_tokens, args.requests, f"s{k}") for k in range(streams)]
                gevent.joinall(jobs, raise_error=True)
                wall = time.perf_counter() - t1
                recs = [r for j in jobs for r in j.value]
                bad = [r for r in recs if r.status != OK or r.completion_tokens != args.max_tokens]
                tokens = sum(r.completion_tokens or 0 for r in recs)
                tpot = sorted(r.tpot_ms for r in recs if r.tpot_ms is not None)
                print(f"streams={streams}: start {started:.2f} s; {tokens} tokens in {wall:.2f} s = "
                      f"{tokens / wall:.0f} tok/s aggregate, {tokens / wall / streams:.0f} tok/s per stream; "
                      f"median TPOT {tpot[len(tpot) // 2]:.2f} ms; server gauge predicted_tokens_seconds "
                      f"{gauge(url, 'predicted_tokens_seconds'):.0f}; rows not ok or not exactly "
                      f"max_tokens: {len(bad)}")
            finally:
                stop_llama_server(proc)


if __name__ == "__main__":
    main()
