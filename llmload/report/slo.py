"""Service-level objectives: ``[SCENARIO:]METRIC=VALUE`` with METRIC like ``ttft_p95_ms``.

Latency metrics: ``{ttft,ttft_visible,tpot,e2e,itl_max}_{pNN|mean|median}_ms`` (over the ok
requests of a step); ``error_rate`` (failed ÷ finished, cancelled excluded). A step meets an
SLO when its value is ≤ the limit. Per request (for goodput) a latency SLO holds when that
request's own value is ≤ the limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

LATENCY = ("ttft_visible", "itl_max", "ttft", "tpot", "e2e")
_PATTERN = re.compile(r"^(ttft_visible|itl_max|ttft|tpot|e2e)_(p\d+(?:\.\d+)?|mean|median)_ms$")


@dataclass(frozen=True)
class SLO:
    metric: str  # e.g. "ttft_p95_ms" or "error_rate"
    limit: float
    scenario: str | None = None  # None: every scenario, and the whole run

    @property
    def field(self) -> str | None:
        """The request column it looks at (``ttft_ms``), None for error_rate."""
        m = _PATTERN.match(self.metric)
        return f"{m.group(1)}_ms" if m else None

    @property
    def stat(self) -> str | None:
        m = _PATTERN.match(self.metric)
        return m.group(2) if m else None

    def text(self) -> str:
        scope = f"{self.scenario}:" if self.scenario else ""
        return f"{scope}{self.metric}={self.limit:g}"

    def value(self, values: np.ndarray, errors: int, finished: int) -> float:
        """This SLO's metric over one step's numbers (NaN when nothing to measure)."""
        if self.metric == "error_rate":
            return errors / finished if finished else float("nan")
        values = values[~np.isnan(values)]
        if not len(values):
            return float("nan")
        stat = self.stat
        if stat == "mean":
            return float(values.mean())
        q = 50.0 if stat == "median" else float(stat[1:])
        return float(np.percentile(values, q))


def parse_slo(text: str, where: str = "--slo") -> SLO:
    spec = text.strip()
    scope, _, rest = spec.rpartition(":") if ":" in spec.split("=", 1)[0] else ("", "", spec)
    metric, sep, value = rest.partition("=")
    metric = metric.strip()
    if not sep:
        raise ValueError(f"{where} {text!r}: expected [SCENARIO:]METRIC=VALUE, e.g. ttft_p95_ms=2000")
    if metric != "error_rate" and not _PATTERN.match(metric):
        raise ValueError(f"{where} {text!r}: unknown metric {metric!r}; expected error_rate or "
                         "{ttft,ttft_visible,tpot,e2e,itl_max}_{pNN,mean,median}_ms, e.g. tpot_p99_ms")
    try:
        limit = float(value)
    except ValueError:
        limit = float("nan")
    if not limit >= 0:
        raise ValueError(f"{where} {text!r}: the limit must be a number >= 0, got {value!r}")
    if metric == "error_rate" and limit > 1:
        raise ValueError(f"{where} {text!r}: error_rate is a fraction between 0 and 1")
    stat = _PATTERN.match(metric).group(2) if metric != "error_rate" else None
    if stat and stat.startswith("p") and not 0 < float(stat[1:]) <= 100:
        raise ValueError(f"{where} {text!r}: percentile must be in (0, 100]")
    return SLO(metric=metric, limit=limit, scenario=scope.strip() or None)


def slos_for(slos: list[SLO], scenario: str | None) -> list[SLO]:
    """The SLOs that apply to a scenario (None: the whole run, unscoped SLOs only)."""
    if scenario is None:
        return [s for s in slos if s.scenario is None]
    scoped = {s.metric for s in slos if s.scenario == scenario}
    return [s for s in slos if s.scenario == scenario or (s.scenario is None and s.metric not in scoped)]
