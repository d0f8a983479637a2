"""Seeded length and time distributions, written the way a scenario file spells them.

Forms (``what`` names the key for error messages):

* ``128`` or ``{dist: fixed, value: 128}``
* ``"100-200"`` or ``{dist: uniform, min: 100, max: 200}`` (inclusive for whole numbers)
* ``{dist: normal, mean: 500, std: 100, min: 1, max: 2000}`` (clipped to [min, max])
* ``{dist: lognormal, median: 300, sigma: 0.5, min: 1, max: 8000}`` (or ``mean`` instead of ``median``)
* ``{dist: empirical, values: [100, 200, 400], weights: [1, 2, 1]}``
* ``{dist: histogram, bins: [[0, 100, 5], [100, 1000, 1]]}`` (uniform within a bin, bins by weight)

Usage::

    d = parse_distribution({"dist": "normal", "mean": 500, "std": 100}, "input_tokens")
    d.sample(random.Random(1))   # -> 517
    d.mean                       # -> 500.0 (approximately, before clipping)
    d.top                        # -> inf (the largest draw: a normal is bounded only by its max:)
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass
from typing import Any


class SpecError(ValueError):
    """A scenario value that is wrong; ``path`` is its key path, e.g. workloads.rag.prefix.count."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Distribution:
    kind: str
    params: tuple[float, ...]
    lo: float
    hi: float
    integer: bool
    values: tuple[float, ...] = ()
    cum_weights: tuple[float, ...] = ()
    bins: tuple[tuple[float, float], ...] = ()

    def sample(self, rng: random.Random) -> float:
        k = self.kind
        if k == "fixed":
            x = self.params[0]
        elif k == "uniform":
            a, b = self.params
            x = rng.randint(int(a), int(b)) if self.integer else rng.uniform(a, b)
        elif k == "normal":
            x = rng.gauss(self.params[0], self.params[1])
        elif k == "lognormal":
            x = rng.lognormvariate(self.params[0], self.params[1])
        elif k == "empirical":
            i = bisect.bisect_right(self.cum_weights, rng.random() * self.cum_weights[-1])
            x = self.values[min(i, len(self.values) - 1)]
        else:  # histogram
            i = bisect.bisect_right(self.cum_weights, rng.random() * self.cum_weights[-1])
            a, b = self.bins[min(i, len(self.bins) - 1)]
            x = rng.uniform(a, b)
        x = min(max(x, self.lo), self.hi)
        return int(round(x)) if self.integer else float(x)

    @property
    def top(self) -> float:
        """The largest value a draw can take: ``max:`` (or infinity) for normal and lognormal, else the
        largest value, bin or bound that has weight, clipped to ``max:``."""
        k = self.kind
        if k == "fixed":
            x = self.params[0]
        elif k == "uniform":
            x = self.params[1]
        elif k in ("normal", "lognormal"):
            x = math.inf if self.params[1] > 0 else self.params[0] if k == "normal" else math.exp(self.params[0])
        else:
            weighted = [b > a for a, b in zip((0.0, *self.cum_weights[:-1]), self.cum_weights, strict=True)]
            tops = self.values if k == "empirical" else tuple(high for _, high in self.bins)
            x = max(t for t, w in zip(tops, weighted, strict=True) if w)
        x = min(max(x, self.lo), self.hi)
        return float(round(x)) if self.integer and math.isfinite(x) else x

    @property
    def mean(self) -> float:
        """The distribution's mean before clipping (for expectations shown to users)."""
        k = self.kind
        if k == "fixed":
            return self.params[0]
        if k == "uniform":
            return (self.params[0] + self.params[1]) / 2
        if k == "normal":
            return self.params[0]
        if k == "lognormal":
            return math.exp(self.params[0] + self.params[1] ** 2 / 2)
        total = self.cum_weights[-1]
        weights = [b - a for a, b in zip((0.0, *self.cum_weights[:-1]), self.cum_weights, strict=True)]
        if k == "empirical":
            return sum(v * w for v, w in zip(self.values, weights, strict=True)) / total
        return sum((a + b) / 2 * w for (a, b), w in zip(self.bins, weights, strict=True)) / total


def _num(spec: dict, key: str, path: str, minimum: float | None = None, required: bool = True) -> float | None:
    if key not in spec:
        if required:
            raise SpecError(f"{path}.{key}", "missing")
        return None
    v = spec[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        raise SpecError(f"{path}.{key}", f"expected a number, got {v!r}")
    if minimum is not None and v < minimum:
        raise SpecError(f"{path}.{key}", f"expected a number >= {minimum:g}, got {v!r}")
    return float(v)


KEYS = {
    "fixed": {"value"}, "uniform": {"min", "max"}, "normal": {"mean", "std", "min", "max"},
    "lognormal": {"median", "mean", "sigma", "min", "max"}, "empirical": {"values", "weights", "min", "max"},
    "histogram": {"bins", "min", "max"},
}


def parse_distribution(spec: Any, path: str, integer: bool = True, minimum: float = 0.0) -> Distribution:
    """Parse one distribution; raise SpecError naming ``path`` and what was expected."""
    inf = math.inf
    if isinstance(spec, bool):
        raise SpecError(path, f"expected a number, \"LOW-HIGH\" or a distribution mapping, got {spec!r}")
    if isinstance(spec, int | float):
        if spec < minimum:
            raise SpecError(path, f"expected a number >= {minimum:g}, got {spec!r}")
        return Distribution("fixed", (float(spec),), minimum, inf, integer)
    if isinstance(spec, str):
        lo, sep, hi = spec.partition("-")
        try:
            a, b = float(lo), float(hi) if sep else float(lo)
        except ValueError:
            raise SpecError(path, f"expected N or \"LOW-HIGH\", got {spec!r}") from None
        if a < minimum or b < a:
            raise SpecError(path, f"expected {minimum:g} <= LOW <= HIGH, got {spec!r}")
        return Distribution("uniform" if sep else "fixed", (a, b) if sep else (a,), minimum, inf, integer)
    if not isinstance(spec, dict):
        raise SpecError(path, f"expected a number, \"LOW-HIGH\" or a mapping with dist:, got {type(spec).__name__}")
    kind = spec.get("dist")
    if kind not in KEYS:
        raise SpecError(f"{path}.dist", f"expected one of {', '.join(KEYS)}, got {kind!r}")
    unknown = set(spec) - KEYS[kind] - {"dist"}
    if unknown:
        raise SpecError(f"{path}.{sorted(unknown)[0]}", f"unknown key for dist {kind} (known: "
                        f"{', '.join(sorted(KEYS[kind]))})")
    lo = _num(spec, "min", path, minimum, required=False)
    hi = _num(spec, "max", path, minimum, required=False)
    lo = minimum if lo is None else lo
    hi = inf if hi is None else hi
    if hi < lo:
        raise SpecError(f"{path}.max", f"max {hi:g} is below min {lo:g}")
    if kind == "fixed":
        return Distribution(kind, (_num(spec, "value", path, minimum),), lo, hi, integer)
    if kind == "uniform":
        a, b = _num(spec, "min", path, minimum), _num(spec, "max", path, minimum)
        return Distribution(kind, (a, b), a, b, integer)
    if kind == "normal":
        return Distribution(kind, (_num(spec, "mean", path), _num(spec, "std", path, 0.0)), lo, hi, integer)
    if kind == "lognormal":
        sigma = _num(spec, "sigma", path, 0.0)
        median = _num(spec, "median", path, 0.0, required=False)
        mean = _num(spec, "mean", path, 0.0, required=False)
        if (median is None) == (mean is None):
            raise SpecError(path, "lognormal needs exactly one of median or mean")
        if (median or mean) <= 0:
            raise SpecError(f"{path}.{'median' if median is not None else 'mean'}", "expected a number > 0")
        mu = math.log(median) if median is not None else math.log(mean) - sigma**2 / 2
        return Distribution(kind, (mu, sigma), lo, hi, integer)
    if kind == "empirical":
        values = spec.get("values")
        if not isinstance(values, list) or not values or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= minimum for v in values):
            raise SpecError(f"{path}.values", f"expected a non-empty list of numbers >= {minimum:g}")
        weights = spec.get("weights", [1] * len(values))
        _check_weights(weights, len(values), f"{path}.weights")
        cum = tuple(itertools.accumulate(float(w) for w in weights))
        return Distribution(kind, (), lo, hi, integer, values=tuple(float(v) for v in values), cum_weights=cum)
    bins = spec.get("bins")
    if not isinstance(bins, list) or not bins:
        raise SpecError(f"{path}.bins", "expected a non-empty list of [low, high, weight]")
    parsed = []
    for i, b in enumerate(bins):
        if (not isinstance(b, list) or len(b) != 3
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in b)
                or b[0] < minimum or b[1] < b[0] or b[2] < 0):
            raise SpecError(f"{path}.bins[{i}]", f"expected [low, high, weight] with {minimum:g} <= low <= high, "
                            f"weight >= 0, got {b!r}")
        parsed.append(b)
    _check_weights([b[2] for b in parsed], len(parsed), f"{path}.bins")
    cum = tuple(itertools.accumulate(float(b[2]) for b in parsed))
    return Distribution(kind, (), lo, hi, integer, bins=tuple((float(b[0]), float(b[1])) for b in parsed),
                        cum_weights=cum)


def _check_weights(weights: Any, n: int, path: str) -> None:
    if (not isinstance(weights, list) or len(weights) != n
            or not all(isinstance(w, int | float) and not isinstance(w, bool) and w >= 0 for w in weights)
            or sum(weights) <= 0):
        raise SpecError(path, f"expected {n} weights >= 0 that add up to more than 0")
