"""A run's rows held against `llmload mock --log FILE --log-tokens`: the server's own send times.
Pure (the log and rows are read by the caller); used by ``llmload calibrate`` and the benchmarks.

Both clocks are this machine's ``CLOCK_MONOTONIC`` (the mock logs ``perf_counter``), so times
compare directly. Errors are client − truth:

* TTFT: the row's ``ttft_ms`` − (first token's send time − the request's arrival at the server);
  the difference includes the request's trip to the server, which loopback makes ~0.05 ms;
* ``itl_max_ms``: the row's − the largest gap between two of the request's token send times.

Usage::

    truth = read_truth("mock.jsonl")
    times = token_times(truth)
    tokens_between(times, a, b), streams_in_flight(truth, a, b)
    errs = row_errors(rows, truth)           # {"ttft": [...], "itl_max": [...], "pairs": [...], ...}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np


def read_truth(path: str) -> dict[str, dict[str, Any]]:
    """request_id → the mock's log entry (one JSON line per request)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    e = json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not a JSON line: {exc}") from None
                out[e["request_id"]] = e
    return out


def token_times(truth: dict[str, dict[str, Any]]) -> np.ndarray:
    """Every token's send time, sorted (needs ``--log-tokens``)."""
    parts = [np.asarray(e.get("token_mono") or [], dtype=float) for e in truth.values()]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0)


def tokens_between(times: np.ndarray, a: float, b: float) -> int:
    return int(np.searchsorted(times, b) - np.searchsorted(times, a))


def streams_in_flight(truth: dict[str, dict[str, Any]], a: float, b: float) -> float:
    """Mean number of requests between arrival and last token during [a, b)."""
    busy = 0.0
    for e in truth.values():
        end = e.get("last_token_mono") or e["arrival_mono"]
        busy += max(0.0, min(end, b) - max(e["arrival_mono"], a))
    return busy / (b - a) if b > a else 0.0


def true_itl_max_ms(times: list[float]) -> float | None:
    return float(np.max(np.diff(times))) * 1000.0 if len(times) > 1 else None


def row_errors(rows: Iterable[dict[str, Any]], truth: dict[str, dict[str, Any]], since_unix: float | None = None,
               until_unix: float | None = None) -> dict[str, list[float]]:
    """TTFT and itl_max_ms errors (ms) of the ok rows (dicts keyed by CSV column, as csv.DictReader
    gives them) whose request started in [since, until); ``pairs``: (TTFT error, itl_max error or
    None) per request, for judging each request against the tolerances; ``coalesced_reads`` and
    ``tokens``: their sums over those requests (the share of reads that carried several tokens)."""
    ttft: list[float] = []
    itl_max: list[float] = []
    pairs: list[tuple[float, float | None]] = []
    coalesced = tokens = 0
    for r in rows:
        if r["status"] != "ok":
            continue
        start = float(r["start_time"])
        if (since_unix is not None and start < since_unix) or (until_unix is not None and start >= until_unix):
            continue
        e = truth.get(r["request_id"])
        if not e or e.get("first_token_mono") is None:
            continue
        if r["ttft_ms"] in ("", None):
            continue
        ttft.append(float(r["ttft_ms"]) - (e["first_token_mono"] - e["arrival_mono"]) * 1000.0)
        truth_max = true_itl_max_ms(e.get("token_mono") or [])
        itl_err = None
        if truth_max is not None and r["itl_max_ms"] not in ("", None):
            itl_err = float(r["itl_max_ms"]) - truth_max
            itl_max.append(itl_err)
        pairs.append((ttft[-1], itl_err))
        coalesced += int(r.get("coalesced_reads") or 0)
        tokens += int(r.get("completion_tokens") or 0)
    return {"ttft": ttft, "itl_max": itl_max, "pairs": pairs, "coalesced_reads": coalesced, "tokens": tokens}


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None
