"""The fuzz tier's seed corpus: real bytes from ``tests/fixtures/`` (recorded and rebuilt server
responses, /metrics bodies) and the shipped scenario, trace and sweep files, split the way each
parser takes them. Read once per process."""

from __future__ import annotations

import functools
import glob
import json
import os

from llmload.wire.http1 import BodyDecoder, parse_head
from tests.support.processes import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SCENARIOS = os.path.join(ROOT, "scenarios")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@functools.cache
def responses() -> tuple[bytes, ...]:
    """Whole HTTP/1.1 responses (head and body) as servers sent them."""
    paths = sorted(glob.glob(os.path.join(FIXTURES, "streams", "*.http")) +
                   glob.glob(os.path.join(FIXTURES, "real", "llamacpp", "*.response.http")))
    return tuple(_read(p) for p in paths)


def split_response(raw: bytes) -> tuple[bytes, bytes]:
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        raw = raw.replace(b"\n", b"\r\n")
        end = raw.find(b"\r\n\r\n")
    return raw[:end], raw[end + 4:]  # the head without the blank line, as parse_head takes it


@functools.cache
def heads() -> tuple[bytes, ...]:
    return tuple(split_response(r)[0] for r in responses())


@functools.cache
def bodies() -> tuple[bytes, ...]:
    """The bodies as framed on the wire (chunked or not)."""
    return tuple(split_response(r)[1] for r in responses())


@functools.cache
def event_streams() -> tuple[bytes, ...]:
    """The SSE bytes of every streamed fixture (the body, de-chunked)."""
    out = []
    for raw in responses():
        head_bytes, body = split_response(raw)
        try:
            head = parse_head(head_bytes)
            data, _ = BodyDecoder(head).feed(body)
        except ValueError:
            continue
        if b"data:" in data:
            out.append(data)
    return tuple(out)


@functools.cache
def events() -> tuple[bytes | tuple[str, bytes], ...]:
    """Single SSE events (their data, or (name, data)) from every fixture stream."""
    from llmload.wire.sse import SSEDecoder

    out: list = []
    for stream in event_streams():
        d = SSEDecoder()
        out.extend(d.feed(stream))
        out.extend(d.flush())
    return tuple(out)


@functools.cache
def json_bodies() -> tuple[bytes, ...]:
    """Whole JSON answers (error bodies, non-streamed answers) from the fixtures."""
    out = []
    for raw in responses():
        head_bytes, body = split_response(raw)
        try:
            data, _ = BodyDecoder(parse_head(head_bytes)).feed(body)
        except ValueError:
            continue
        if data.lstrip().startswith(b"{"):
            out.append(data)
    return tuple(out)


@functools.cache
def expositions() -> tuple[bytes, ...]:
    return tuple(_read(p) for p in sorted(glob.glob(os.path.join(FIXTURES, "metrics", "*.prom"))))


@functools.cache
def trace_files() -> dict[str, bytes]:
    """Shipped sample traces by format."""
    d = os.path.join(SCENARIOS, "data", "traces")
    return {"mooncake": _read(os.path.join(d, "mooncake_sample.jsonl")),
            "azure": _read(os.path.join(d, "azure_code_sample.csv")),
            "burstgpt": _read(os.path.join(d, "burstgpt_sample.csv")),
            "plain": _read(os.path.join(d, "plain_sample.jsonl")),
            "otel": _read(os.path.join(d, "otel_sample.jsonl")),
            "weka": _read(os.path.join(d, "weka_sample.jsonl")),
            "sglang": _read(os.path.join(d, "sglang_agentic_sample.json"))}


@functools.cache
def session_objects(fmt: str) -> tuple[dict, ...]:
    """The agentic samples' sessions, one JSON object each."""
    text = trace_files()[fmt].decode()
    try:
        whole = json.loads(text)
        objs = whole if isinstance(whole, list) else [whole]
    except ValueError:
        objs = [json.loads(line) for line in text.splitlines() if line.strip()]
    return tuple(objs)


@functools.cache
def scenario_texts() -> tuple[str, ...]:
    return tuple(_read(p).decode() for p in sorted(glob.glob(os.path.join(SCENARIOS, "*.yaml"))))


@functools.cache
def plan_texts() -> tuple[str, ...]:
    paths = sorted(glob.glob(os.path.join(ROOT, "**", "*sweep*.yaml"), recursive=True))
    texts = [_read(p).decode() for p in paths if ".venv" not in p]
    texts.append(PLAN)
    return tuple(texts)


PLAN = """\
slo: [ttft_p95_ms=2000, tpot_p95_ms=60]
target_rps: 20
headroom: 0.3
deployments:
  small: {serve: "python -m llmload.cli mock --port {port} --max-num-seqs {max_num_seqs}", gpus: 1, gpu_hourly_usd: 2.0}
  remote: {host: "http://10.0.0.5:8000", tp: 2, gpu_hourly_usd: 4.0}
params: {max_num_seqs: [64, 128]}
workloads: {chat: {input_tokens: 512, output_tokens: 128}}
load: {steps: [8, 16, 32], step_seconds: 30, warmup_s: 5}
repeats: 1
reset: none
"""
