"""The live view: rolling-window LLM stats per scenario, and live SLO checks. Pure (times passed in).

Rows are bucketed by the second their request *completed*; per-chunk ITL comes as histogram
deltas bucketed by the second they arrived. A window covers ``[now − lag − W, now − lag)``:
``lag`` allows for rows still on their way (a worker reports every 3 s), so a window is never
read while its newest seconds are half filled.

Usage::

    live = LiveWindow()
    live.add_row(row)                       # every request row, as it arrives
    live.add_itl("chat", itl_hist, now)     # per-chunk ITL deltas
    rows = live.snapshot(now, lag_s=4.0)    # one dict per scenario + "Aggregated"
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from llmload.histogram import Histogram
from llmload.record import CSV_COLUMNS, OK
from llmload.stats import AGGREGATED, ScenarioStats

WINDOW_S = 10.0
KEEP_S = 120.0
MIN_SAMPLES = 10  # fewer ok requests in a window: no SLO verdict

_SCENARIO = CSV_COLUMNS.index("scenario")
_START = CSV_COLUMNS.index("start_time")
_E2E = CSV_COLUMNS.index("e2e_ms")


class LiveWindow:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._rows: dict[int, dict[str, ScenarioStats]] = defaultdict(dict)
        self._itl: dict[int, dict[str, Histogram]] = defaultdict(dict)

    def add_row(self, row: tuple) -> None:
        end = row[_START] + (row[_E2E] or 0.0) / 1000.0
        bucket = self._rows[int(end)]
        s = bucket.get(row[_SCENARIO])
        if s is None:
            s = bucket[row[_SCENARIO]] = ScenarioStats()
        s.add_row(row)

    def add_itl(self, scenario: str, hist: Histogram, now: float) -> None:
        bucket = self._itl[int(now)]
        h = bucket.get(scenario)
        if h is None:
            bucket[scenario] = h = Histogram()
        h.merge(hist)

    def prune(self, now: float) -> None:
        cutoff = int(now - KEEP_S)
        for store in (self._rows, self._itl):
            for sec in [s for s in store if s < cutoff]:
                del store[sec]

    def merged(self, now: float, lag_s: float) -> tuple[dict[str, ScenarioStats], float]:
        """Per scenario, the stats of the window; and the window's length in seconds."""
        hi = int(now - lag_s)
        lo = hi - int(self.window_s)
        out: dict[str, ScenarioStats] = {}
        for sec in range(lo, hi):
            for name, s in self._rows.get(sec, {}).items():
                t = out.get(name)
                if t is None:
                    t = out[name] = ScenarioStats()
                t.merge(s)
            for name, h in self._itl.get(sec, {}).items():
                t = out.get(name)
                if t is None:
                    t = out[name] = ScenarioStats()
                t.hist["itl"].merge(h)
        return out, float(hi - lo)

    def snapshot(self, now: float, lag_s: float) -> list[dict[str, Any]]:
        per, w = self.merged(now, lag_s)
        rows = [window_row(name, s, w) for name, s in sorted(per.items())]
        if len(per) != 1:  # with no data yet, an empty Aggregated row still carries users and in-flight
            total = ScenarioStats()
            for s in per.values():
                total.merge(s)
            rows.append(window_row(AGGREGATED, total, w))
        return rows


def _r(v: float | None, nd: int = 2) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(v, nd)


def window_row(name: str, s: ScenarioStats, window_s: float) -> dict[str, Any]:
    h = s.hist
    ttft = h["ttft"].percentiles((50, 95, 99)) if h["ttft"] else [None] * 3
    tpot = h["tpot"].percentiles((50, 95, 99)) if h["tpot"] else [None] * 3
    itl = h["itl"].percentiles((50, 95, 99)) if h["itl"] else [None] * 3
    errors = {k: v for k, v in s.status_counts.items() if k not in (OK, "cancelled")}
    return {
        "scenario": name,
        "window_s": window_s,
        "requests": s.requests,
        "ok": s.ok,
        "errors": sum(errors.values()),
        "errors_by_status": errors,
        "rps": _r(s.ok / window_s, 3),
        "output_tps": _r(s.output_tokens / window_s, 1),
        "ttft_p50_ms": _r(ttft[0]), "ttft_p95_ms": _r(ttft[1]), "ttft_p99_ms": _r(ttft[2]),
        "tpot_p50_ms": _r(tpot[0]), "tpot_p95_ms": _r(tpot[1]), "tpot_p99_ms": _r(tpot[2]),
        "itl_p50_ms": _r(itl[0]), "itl_p95_ms": _r(itl[1]), "itl_p99_ms": _r(itl[2]),
        "worst_stall_ms": _r(h["itl_max"].max) if h["itl_max"] else None,
        "cache_hit_ratio": _r(s.cached_tokens / s.prompt_tokens, 4) if s.prompt_tokens else None,
        "_stats": s,
    }


@dataclass(frozen=True)
class LiveSLO:
    """An SLO checked on the live window: ``scenario`` None means the whole run."""

    metric: str
    limit: float
    scenario: str | None = None


def slo_value(slo: LiveSLO, s: ScenarioStats) -> float | None:
    """The SLO's metric over a window's stats; None when there are too few samples to judge."""
    if slo.metric == "error_rate":
        finished = s.requests - s.status_counts.get("cancelled", 0)
        errors = finished - s.ok
        return errors / finished if finished >= MIN_SAMPLES else None
    field, _, rest = slo.metric.rpartition("_ms")[0].rpartition("_")
    name, stat = field, rest
    h = s.hist.get(name)
    if h is None or h.count < MIN_SAMPLES:
        return None
    if stat == "mean":
        return h.mean
    q = 50.0 if stat == "median" else float(stat[1:])
    return h.percentile(q)


def broken_slos(slos: list[LiveSLO], per: dict[str, ScenarioStats]) -> list[str]:
    """The SLOs the window breaks, as text (``[scenario:]metric=value>limit``)."""
    total = ScenarioStats()
    for s in per.values():
        total.merge(s)
    out = []
    for slo in slos:
        s = total if slo.scenario is None else per.get(slo.scenario)
        if s is None:
            continue
        v = slo_value(slo, s)
        if v is not None and v > slo.limit:
            scope = f"{slo.scenario}:" if slo.scenario else ""
            out.append(f"{scope}{slo.metric}={v:.4g}>{slo.limit:g}")
    return out
