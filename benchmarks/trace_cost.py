"""What trace replay, images and agent calls cost the client: parse rate and memory per trace row,
µs per prompt built from Mooncake hash ids, ms/µs per image content part, and µs per whole
request (built and JSON-encoded, as a user does before sending) of a trace entry, an image
prompt and an agent call.

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

from llmload.workload.file.scenario import load_scenario  # noqa: E402
from llmload.workload.images import ImageSet, image_part, image_url, make_image  # noqa: E402
from llmload.workload.scenario_workload import ScenarioWorkload  # noqa: E402
from llmload.workload.tasks.agent import AgentWorkload  # noqa: E402
from llmload.workload.text import TextSource  # noqa: E402
from llmload.workload.trace.hash_blocks import block_text, prompt_from_hash_ids  # noqa: E402
from llmload.workload.trace.read import load_trace  # noqa: E402
from llmload.workload.trace.replay import TraceWorkload  # noqa: E402

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

    whole_requests(reqs)


def per_request(label: str, make, n: int) -> None:
    make()  # warm caches (blocks, pictures)
    t = time.perf_counter()
    size = 0
    for _ in range(n):
        size += len(make().encode())
    dt = (time.perf_counter() - t) / n
    print(f"request {label}: {dt * 1e6:.0f} us built and encoded, {size / n / 1e3:.0f} KB body")


def whole_requests(reqs) -> None:
    text = TextSource(1)
    trace_spec = load_scenario(os.path.join(ROOT, "scenarios/trace_mooncake.yaml")).workloads[0]
    tw = TraceWorkload(trace_spec, 14, 1, "m", text)
    it = iter(reqs * 100)
    per_request("trace entry (Mooncake sample, mean 3.3k tokens)", lambda: tw.request_for(next(it)), 2000)
    vision = load_scenario(os.path.join(ROOT, "scenarios/vision.yaml"))
    for w in vision.workloads:
        im = w.images
        images = ImageSet(im.count, im.width, im.height, im.format, im.distinct, 8)
        sw = ScenarioWorkload(w, 8, 1, "m", text, images=images)
        per_request(f"{w.name} ({im.count} x {im.width}x{im.height} {im.format})", sw.next_request, 500)
    agent_spec = load_scenario(os.path.join(ROOT, "scenarios/agent.yaml")).workloads[0]
    agent = AgentWorkload(agent_spec, 1, "m", text)
    call = [{"id": "c1", "type": "function", "function": {"name": "search_docs", "arguments": '{"query": "a b c"}'}}]

    def agent_call():
        req = agent.start_task()
        for _ in range(3):
            req = agent.next_call(req, True, "", call) or req
        return req

    per_request("agent call (4 tools, 4th step: ~1.5k tokens of history)", agent_call, 2000)


if __name__ == "__main__":
    main()
