"""``llmload compare``'s noise verdicts: for each run against the first (the baseline), at each
load level both measured with a verdict, whether each latency percentile differs for real or
within noise (:mod:`llmload.report.compare.noise`, on the step's own samples), and the throughput, which
only repeats can judge: runs given the same ``--label`` are repeats of one configuration.
``--fail-on-regression METRIC=PCT`` reads these.

Usage::

    rows = noise_rows(cmp)      # [{"run": "new", "level": 8, "metric": "tpot_p95_ms", "verdict": "real", ...}]
    failing = regressions(rows, parse_gates(["tpot_p95_ms=5"]))
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from llmload.report.compare.compare_runs import Comparison, Run
from llmload.report.compare.noise import Difference, mean_difference, percentile_difference, regression_beyond
from llmload.report.load import ReportError

LATENCY = tuple((f"{f}_p{q}_ms", f"{f}_ms", q) for f in ("ttft", "tpot", "e2e") for q in (50, 95, 99))
THROUGHPUT = ("rps", "output_tps")  # higher is better
GATE = re.compile(r"^(?P<metric>[a-z0-9_]+)=(?P<pct>\d+(\.\d+)?)$")


def _samples(run: Run, step: Any, column: str) -> np.ndarray:
    df = run.report.df
    start = df["start_time"].to_numpy(dtype=float)
    mask = df["ok"].to_numpy(dtype=bool) & (start >= step.measured_from) & (start < step.end)
    return df[column].to_numpy(dtype=float)[mask] if column in df.columns else np.empty(0)


def _steps_by_level(run: Run) -> dict[float, Any]:
    return {float(s.data["level"]): s for s in run.report.overall.steps if not s.data.get("thin")}


def noise_rows(cmp: Comparison, repeats_by_label: bool = True) -> list[dict[str, Any]]:
    """Each label against the first run's label. With ``repeats_by_label`` (labels the user gave),
    runs that share a label are repeats of one configuration: their samples are pooled for latency,
    and their step values judge throughput; without, every run stands alone."""
    groups: dict[str, list[Run]] = {}
    for i, run in enumerate(cmp.runs):
        groups.setdefault(run.label if repeats_by_label else str(i), []).append(run)
    base_label = next(iter(groups))
    base = [(r, _steps_by_level(r)) for r in groups[base_label]]
    rows = []
    for i, (label, runs) in enumerate(groups.items()):
        if label == base_label:
            continue
        mine = [(r, _steps_by_level(r)) for r in runs]
        levels = set.intersection(*(set(st) for _, st in base + mine))
        for level in sorted(levels):
            for metric, column, q in LATENCY:
                a = np.concatenate([_samples(r, st[level], column) for r, st in base])
                b = np.concatenate([_samples(r, st[level], column) for r, st in mine])
                rows.append(_row(runs[0], level, metric, percentile_difference(a, b, q, seed=i), True))
            for metric in THROUGHPUT:
                d = mean_difference([st[level].data[metric] for _, st in base],
                                    [st[level].data[metric] for _, st in mine])
                rows.append(_row(runs[0], level, metric, d, False))
    return rows


def _row(run: Run, level: float, metric: str, d: Difference, higher_is_worse: bool) -> dict[str, Any]:
    return {"run": run.label, "level": level, "metric": metric, "higher_is_worse": higher_is_worse, **d.to_json(),
            "low_pct": None if d.low_pct is None else round(d.low_pct, 3),
            "high_pct": None if d.high_pct is None else round(d.high_pct, 3), "_diff": d}


def parse_gates(texts: list[str]) -> dict[str, float]:
    known = {m for m, _, _ in LATENCY} | set(THROUGHPUT)
    out = {}
    for text in texts:
        m = GATE.match(text.strip())
        if not m:
            raise ReportError(f"--fail-on-regression {text!r}: expected METRIC=PCT, e.g. tpot_p95_ms=5")
        if m["metric"] not in known:
            raise ReportError(f"--fail-on-regression {text!r}: unknown metric {m['metric']!r}; known: "
                              + ", ".join(sorted(known)))
        out[m["metric"]] = float(m["pct"])
    return out


def regressions(rows: list[dict[str, Any]], gates: dict[str, float]) -> list[str]:
    """One line per real regression beyond its gate."""
    out = []
    for r in rows:
        pct = gates.get(r["metric"])
        if pct is not None and regression_beyond(r["_diff"], pct, r["higher_is_worse"]):
            out.append(f"{r['run']}: {r['metric']} at {r['level']:g} is {r['pct']:+.1f} % against the baseline "
                       f"(interval {r['low_pct']:+.1f} … {r['high_pct']:+.1f} %), a real regression beyond {pct:g} %")
    return out


def public(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
