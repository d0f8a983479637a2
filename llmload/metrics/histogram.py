"""Mergeable log-bucketed histograms: ≤ 1 % relative error on every percentile.

Bucket ``i ≥ 1`` holds values in ``[MIN·γ^(i−1), MIN·γ^i)`` with γ = 1.02; a percentile is
reported as the bucket's geometric middle (clamped to the exact min and max), so its relative
error is at most √γ − 1 ≈ 0.995 %. Bucket 0 holds everything ≤ ``MIN`` (1 µs when values are
milliseconds). Merging adds counts, so merged percentiles are exactly those of the union.
``to_wire``/``from_wire`` give plain lists and numbers (msgpack-safe for Locust's channel).

``record_many`` (every ITL gap of every request) only queues its list: count, sum, min and max
are kept at once, the buckets are counted with numpy when ``PENDING_MAX`` values wait or when
anything reads them (about 20 ns a value instead of 0.5 µs; benchmarks/request_overhead.py).

Two values less than a bucket apart (2 %) can come out as one percentile: 28.665, 28.83 and 29.01
all read 28.79. So a percentile is shown with :data:`SIGNIFICANT` digits (:func:`significant`,
:func:`figure`): about what the 1 % supports, and no digit that suggests more.

Usage::

    h = Histogram()
    h.record(12.5)
    h.merge(other)
    h.percentile(99)        # nearest-rank p99, ≤ 1 % off
    figure(h.percentile(99))   # "12.5": 3 significant digits, as text
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

import numpy as np

GAMMA = 1.02
MIN_VALUE = 0.001
_INV_LOG_GAMMA = 1.0 / math.log(GAMMA)
_LOG = math.log
PENDING_MAX = 2048  # values queued by record_many before their buckets are counted (~0.3 ms of numpy)


class Histogram:
    __slots__ = ("_counts", "_pending", "_pending_n", "count", "total", "min", "max")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._pending: list[Sequence[float]] = []
        self._pending_n = 0
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    @property
    def counts(self) -> dict[int, int]:
        """Bucket index → count (queued values counted first)."""
        if self._pending:
            self._count_pending()
        return self._counts

    def record(self, value: float) -> None:
        i = int(_LOG(value / MIN_VALUE) * _INV_LOG_GAMMA) + 1 if value > MIN_VALUE else 0
        counts = self._counts
        counts[i] = counts.get(i, 0) + 1
        self.count += 1
        self.total += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    def record_many(self, values: Sequence[float] | Iterable[float]) -> None:
        """Record every value; a list is queued as it is (do not change it afterwards)."""
        if not isinstance(values, list | tuple):
            values = list(values)
        n = len(values)
        if not n:
            return
        self._pending.append(values)
        self._pending_n += n
        self.count += n
        self.total += sum(values)
        lo, hi = min(values), max(values)
        if lo < self.min:
            self.min = lo
        if hi > self.max:
            self.max = hi
        if self._pending_n >= PENDING_MAX:
            self._count_pending()

    def _count_pending(self) -> None:
        # Hand-written instead of record() per value: this is most of a request's accounting.
        values = np.fromiter(chain.from_iterable(self._pending), dtype=np.float64, count=self._pending_n)
        self._pending = []
        self._pending_n = 0
        idx = np.zeros(len(values), dtype=np.int64)
        above = values > MIN_VALUE
        idx[above] = (np.log(values[above] / MIN_VALUE) * _INV_LOG_GAMMA).astype(np.int64) + 1
        base = int(idx.min())
        counts = self._counts
        for off, c in enumerate(np.bincount(idx - base).tolist()):
            if c:
                counts[base + off] = counts.get(base + off, 0) + c

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
        counts = self.counts
        keys = np.fromiter(sorted(counts), dtype=np.int64)
        cum = np.cumsum([counts[int(k)] for k in keys])
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
        counts = self.counts
        keys = sorted(counts)
        return {"k": keys, "c": [counts[k] for k in keys], "n": self.count, "s": self.total,
                "lo": self.min if self.count else None, "hi": self.max if self.count else None}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Histogram:
        h = cls()
        h._counts = dict(zip(data["k"], data["c"], strict=True))
        h.count = int(data["n"])
        h.total = float(data["s"])
        if h.count:
            h.min, h.max = float(data["lo"]), float(data["hi"])
        return h

    def __bool__(self) -> bool:
        return self.count > 0


SIGNIFICANT = 3
"""Digits a percentile is shown with: the buckets are 2 % wide, each value ≤ 1 % off."""


def significant(v: float | None, digits: int = SIGNIFICANT) -> float | None:
    """``v`` rounded to ``digits`` significant digits (57.234 → 57.2, 12345.6 → 12300.0), as a number;
    None for None, NaN or infinity (no number to show)."""
    if v is None or not math.isfinite(v):
        return None
    if v == 0:
        return 0.0
    r = round(v, digits - 1 - math.floor(math.log10(abs(v))))
    return float(r)


def figure(v: float | None, digits: int = SIGNIFICANT) -> str:
    """``v`` as text with ``digits`` significant digits, never in e-notation (0.9805 → "0.981",
    5.0 → "5.00", 12345.6 → "12300", 999.6 → "1000"); "-" when there is no number."""
    r = significant(v, digits)
    if r is None:
        return "-"
    if r == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(r)))  # of the rounded value: 999.6 → 1000 has one fewer
    return f"{r:.{max(decimals, 0)}f}"
