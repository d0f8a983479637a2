"""Mergeable log-bucketed histograms: ≤ 1 % relative error on every percentile.

Bucket ``i ≥ 1`` holds values in ``[MIN·γ^(i−1), MIN·γ^i)`` with γ = 1.02; a percentile is
reported as the bucket's geometric middle (clamped to the exact min and max), so its relative
error is at most √γ − 1 ≈ 0.995 %. Bucket 0 holds everything ≤ ``MIN`` (1 µs when values are
milliseconds). Merging adds counts, so merged percentiles are exactly those of the union.
``to_wire``/``from_wire`` give plain lists and numbers (msgpack-safe for Locust's channel).

Usage::

    h = Histogram()
    h.record(12.5)
    h.merge(other)
    h.percentile(99)        # nearest-rank p99, ≤ 1 % off
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

GAMMA = 1.02
MIN_VALUE = 0.001
_INV_LOG_GAMMA = 1.0 / math.log(GAMMA)
_LOG = math.log


class Histogram:
    __slots__ = ("counts", "count", "total", "min", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    def record(self, value: float) -> None:
        i = int(_LOG(value / MIN_VALUE) * _INV_LOG_GAMMA) + 1 if value > MIN_VALUE else 0
        counts = self.counts
        counts[i] = counts.get(i, 0) + 1
        self.count += 1
        self.total += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    def record_many(self, values: Iterable[float]) -> None:
        for v in values:
            self.record(v)

    def merge(self, other: Histogram) -> None:
        counts = self.counts
        for i, c in other.counts.items():
            counts[i] = counts.get(i, 0) + c
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan

    def percentiles(self, qs: Iterable[float]) -> list[float]:
        """Nearest-rank percentiles (q in 0..100); NaN when empty."""
        qs = list(qs)
        if not self.count:
            return [math.nan] * len(qs)
        keys = np.fromiter(sorted(self.counts), dtype=np.int64)
        cum = np.cumsum([self.counts[int(k)] for k in keys])
        ranks = np.maximum(np.ceil(np.asarray(qs, dtype=float) / 100.0 * self.count), 1)
        idx = np.searchsorted(cum, ranks, side="left")
        out = []
        for i, rank in zip(idx, ranks, strict=True):
            if rank >= self.count:
                out.append(float(self.max))  # p100 is known exactly
                continue
            k = int(keys[min(int(i), len(keys) - 1)])
            v = MIN_VALUE * GAMMA ** (k - 0.5) if k > 0 else self.min
            out.append(float(min(max(v, self.min), self.max)))
        return out

    def percentile(self, q: float) -> float:
        return self.percentiles([q])[0]

    def to_wire(self) -> dict[str, Any]:
        keys = sorted(self.counts)
        return {"k": keys, "c": [self.counts[k] for k in keys], "n": self.count, "s": self.total,
                "lo": self.min if self.count else None, "hi": self.max if self.count else None}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Histogram:
        h = cls()
        h.counts = dict(zip(data["k"], data["c"], strict=True))
        h.count = int(data["n"])
        h.total = float(data["s"])
        if h.count:
            h.min, h.max = float(data["lo"]), float(data["hi"])
        return h

    def __bool__(self) -> bool:
        return self.count > 0
