"""What trace replay and images cost the client: parse rate and memory per trace row, µs per
prompt built from Mooncake hash ids, and ms/µs per image content part.

Writes synthetic traces of ``--rows`` rows in each format to a temporary directory, parses
them with ``load_trace``, and prints one line per measurement.

    python benchmarks/trace_cost.py [--rows 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from llmload.workload.blocks import block_text, prompt_from_hash_ids  # noqa: E402
from llmload.workload.images import image_part, image_url, make_image  # noqa: E402
from llmload.workload.trace import load_trace  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def write_traces(d: str, rows: int) -> dict[str, str]:
    r = random.Random(1)
    paths = {f: os.path.join(d, f"t.{f}") for f in ("mooncake", "azure", "burstgpt", "plain")}
    with open(paths["mooncake"], "w") as f:
        next_id = 1
        for i in range(rows):
            n = r.randint(1, 48)  # ~24 blocks: the conversation trace's mean of ~12k tokens
            f.write(json.dumps({"timestamp": i * 300, "input_length": n * 512 - 100, "output_length": 300,
                                "hash_ids": [0, *range(next_id, next_id + n - 1)]}) + "\n")
            next_id += n - 1
    with open(paths["azure"], "w", newline="") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
        for i in range(rows):
            f.write(f"2023-11-16 18:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}0000,"
                    f"{r.randint(10, 8000)},{r.randint(1, 500)}\r\n")
    with open(paths["burstgpt"], "w") as f:
        f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
        for i in range(rows):
            a, b = r.randint(10, 4000), r.randint(0, 800)
            f.write(f"{i},ChatGPT,{a},{b},{a + b},Conversation log\n")
    with open(paths["plain"], "w") as f:
        for i in range(rows):
            f.write(json.dumps({"t": i * 0.3, "input_tokens": r.randint(10, 8000), "output_tokens": 100}) + "\n")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for fmt, path in write_traces(d, args.rows).items():
            t = time.perf_counter()
            n = len(load_trace(path, keep_zero_output=True).requests)
            dt = time.perf_counter() - t
            tracemalloc.start()
            kept = load_trace(path, keep_zero_output=True)
            size, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            del kept
            mb = os.path.getsize(path) / 1e6
            print(f"parse {fmt:9s} {n:,} rows ({mb:.0f} MB): {dt / n * 1e6:.2f} us/row, "
                  f"{mb / dt:.0f} MB/s, {size / n:.0f} bytes/row held")

    reqs = load_trace(os.path.join(ROOT, "scenarios/data/traces/mooncake_sample.jsonl")).requests
    for label in ("cold", "warm"):
        if label == "cold":
            block_text.cache_clear()
        t = time.perf_counter()
        for r in reqs:
            prompt_from_hash_ids(r.hash_ids, r.input_tokens)
        dt = (time.perf_counter() - t) / len(reqs)
        mean_in = sum(r.input_tokens for r in reqs) / len(reqs)
        print(f"prompt from hash_ids ({label} block cache), mean {mean_in:.0f} tokens: {dt * 1e6:.0f} us/request")

    for side in (512, 1024):
        for fmt in ("png", "jpeg"):
            make_image.cache_clear()
            image_url.cache_clear()
            t = time.perf_counter()
            url = image_part(side, side, fmt, seed=1)["image_url"]["url"]
            first = time.perf_counter() - t
            n = 20_000
            t = time.perf_counter()
            for _ in range(n):
                image_part(side, side, fmt, seed=1)
            cached = (time.perf_counter() - t) / n
            print(f"image part {side}x{side} {fmt:4s}: {len(url) / 1e3:5.0f} KB data URL, first {first * 1e3:.1f} ms, "
                  f"cached {cached * 1e6:.2f} us/part")


if __name__ == "__main__":
    main()
