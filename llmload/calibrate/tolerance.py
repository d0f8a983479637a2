"""The user's tolerances, and one calibration step judged against them. Pure.

A request is *in tolerance* when its TTFT error is at most ``ttft_error_ms`` and its ``itl_max_ms``
error at most ``itl_max_error_ms`` (both in absolute value, against the mock's log); a step passes
when at least ``share`` of its requests are. Stalls are always measured and reported, but they fail
a step only when ``max_stall_ms`` asks for it: a stall that bends a metric shows in the share.

A step is run ``repeats`` times; its figures are the median over the repeats, with the spread
(lowest and highest) beside each, so that one preemption does not make or break a step.

Usage::

    tol = Tolerances(ttft_error_ms=1.0, itl_max_error_ms=2.0, share=0.99)
    figures = accuracy(errs["pairs"], tol)       # {"share": 0.998, "ttft_share": ..., "ttft_err_p99_ms": ...}
    step = combine([repeat1, repeat2, repeat3])  # medians, step["spread"][key] == [low, high]
    step["ok"], step["why"] = judge(step, tol)
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MOCK_SHORT = 0.9  # the mock delivered less than this share of the modelled tokens: it, not the client, limits
MOCK_BUSY_PCT = 85.0  # ... while it used this much of its core
OTHERS_BUSY_PCT = 20.0  # other processes' CPU (% of a core; not the mock's, not Locust's) that makes a bad
# step the machine's


@dataclass(frozen=True)
class Tolerances:
    """What the user needs the numbers to be: the criteria of every step."""

    ttft_error_ms: float = 1.0
    """a request's TTFT may be off by at most this much (ms)"""
    itl_max_error_ms: float = 2.0
    """a request's ``itl_max_ms`` (its worst gap) may be off by at most this much (ms)"""
    share: float = 0.99
    """the share of requests that must be within both"""
    max_stall_ms: float | None = None
    """when set, a step also fails on an event-loop stall that used more CPU than this (ms)"""

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"--share {self.share:g}: expected a share of requests in (0, 1], e.g. 0.99")
        for flag, v in (("--ttft-error-ms", self.ttft_error_ms), ("--itl-max-error-ms", self.itl_max_error_ms),
                        ("--max-stall-ms", self.max_stall_ms)):
            if v is not None and not v > 0:
                raise ValueError(f"{flag} {v:g}: expected milliseconds > 0")

    def describe(self) -> str:
        text = (f"TTFT error <= {self.ttft_error_ms:g} ms and itl_max error <= {self.itl_max_error_ms:g} ms "
                f"for {self.share * 100:g} % of requests")
        if self.max_stall_ms is not None:
            text += f", no stall over {self.max_stall_ms:g} ms of CPU"
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 4) if values else None


def accuracy(pairs: list[tuple[float, float | None]], tol: Tolerances) -> dict[str, Any]:
    """The error percentiles and in-tolerance shares of one run's requests ((TTFT error, itl_max
    error or None) each, ms). A request without an itl_max (one token) is judged on its TTFT."""
    ttft = [abs(t) for t, _ in pairs]
    itl = [abs(i) for _, i in pairs if i is not None]
    ttft_in = [t <= tol.ttft_error_ms for t in ttft]
    itl_in = [i <= tol.itl_max_error_ms for i in itl]
    both = [abs(t) <= tol.ttft_error_ms and (i is None or abs(i) <= tol.itl_max_error_ms) for t, i in pairs]
    n = len(pairs)
    return {
        "requests": n,
        "ttft_err_p50_ms": _pct(ttft, 50), "ttft_err_p99_ms": _pct(ttft, 99),
        "itl_max_err_p50_ms": _pct(itl, 50), "itl_max_err_p99_ms": _pct(itl, 99),
        "ttft_share": round(sum(ttft_in) / n, 5) if n else None,
        "itl_max_share": round(sum(itl_in) / len(itl), 5) if itl else None,
        "share": round(sum(both) / n, 5) if n else None,
    }


# Figures a step takes as the median of its repeats (the rest are the same in every repeat).
MEDIAN_KEYS = ("seconds", "tps", "tps_per_process", "in_flight", "cpu_pct", "mock_cpu_pct", "requests",
               "ttft_err_p50_ms", "ttft_err_p99_ms", "itl_max_err_p50_ms", "itl_max_err_p99_ms", "ttft_share",
               "itl_max_share", "share", "lag_p99_ms", "stalls", "stall_cpu_max_ms", "coalesced_share",
               "others_cpu_pct", "load_average")
SPREAD_KEYS = ("tps_per_process", "ttft_err_p99_ms", "itl_max_err_p99_ms", "share", "lag_p99_ms",
               "stall_cpu_max_ms", "coalesced_share")


def combine(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """One step from its repeats: the median of each figure (None when no repeat had it), the
    spread [lowest, highest] of the ones that decide, and the repeats themselves."""
    if not repeats:
        raise ValueError("combine: no repeat")
    step = {k: v for k, v in repeats[0].items() if k not in MEDIAN_KEYS}
    for k in MEDIAN_KEYS:
        values = [r[k] for r in repeats if r.get(k) is not None]
        step[k] = round(float(statistics.median(values)), 5) if values else None
    step["spread"] = {k: [min(v), max(v)] for k in SPREAD_KEYS
                      if (v := [r[k] for r in repeats if r.get(k) is not None])}
    step["repeats"] = len(repeats)
    return step


def judge(step: dict[str, Any], tol: Tolerances) -> tuple[bool, str]:
    """Did the client time this step within the tolerances? (False, reason) when not. A mock that
    could not deliver the modelled tokens, or other processes on the client's cores, make a bad step
    say nothing about the client ("mock-limited", "machine busy")."""
    if not step.get("requests"):
        return False, "no request finished in the steady state"
    if step.get("stall_cpu_max_ms") is None:
        return False, "no client health report inside the steady state: use a longer --step-seconds"
    if step["tps"] < MOCK_SHORT * step["expected_tps"] and (step.get("mock_cpu_pct") or 0.0) >= MOCK_BUSY_PCT:
        return False, f"mock-limited (mock CPU {step['mock_cpu_pct']:.0f} %)"
    bad = ""
    if step["share"] < tol.share:
        worst = []
        if (step.get("ttft_share") or 0.0) < tol.share:
            worst.append(f"TTFT error p99 {step['ttft_err_p99_ms']:.2f} ms")
        if step.get("itl_max_share") is not None and step["itl_max_share"] < tol.share:
            worst.append(f"itl_max error p99 {step['itl_max_err_p99_ms']:.2f} ms")
        bad = (f"{step['share'] * 100:.1f} % of requests in tolerance < {tol.share * 100:g} %"
               + (f" ({', '.join(worst)})" if worst else ""))
    elif tol.max_stall_ms is not None and step["stall_cpu_max_ms"] > tol.max_stall_ms:
        bad = f"an event-loop stall used {step['stall_cpu_max_ms']:.1f} ms of CPU > --max-stall-ms {tol.max_stall_ms:g}"
    if bad and (step.get("others_cpu_pct") or 0.0) >= OTHERS_BUSY_PCT:
        return False, (f"machine busy: other processes used {step['others_cpu_pct']:.0f} % of a core meanwhile "
                       f"({bad})")
    return not bad, bad


def is_clients_fault(step: dict[str, Any]) -> bool:
    """A failed step that says the client, not the mock or the machine, lost the tolerances."""
    return not step["ok"] and not step["why"].startswith(("mock", "machine", "no "))
