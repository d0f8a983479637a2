"""The steps measured while the load generator itself was limited.

The live view judges the client every interval (2 s) and writes its verdict into
``PREFIX_llm_history.csv`` (``client_limited``, ``client_cause``, ``client_others_cpu_max``): the
same intervals as the run's client verdict in ``PREFIX_run.json``. A step whose measured window
overlaps a limited interval gets ``client_limited`` in its JSON and a warning: its client-side
latencies hold time the client lost (a stalled event loop reads late, and sends its next request
late), not only the server's. On vLLM with two sequence slots, three of a 2-user step's 40
requests caught in such a stall made its TTFT p95 623 ms (its p90 124 ms; vLLM's own p95 209 ms),
a verdict the server never earned. The capacity itself is left as measured: the warning
says which step to rerun.

Usage::

    limits = load_client_limits("runs/x")           # [] without the file, or in a run before it
    warnings = flag_client_limited_steps(steps, limits, "users")
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from llmload import files
from llmload.report.steps import Step

COLUMNS = ("time", "client_limited", "client_cause", "client_others_cpu_max")


@dataclass(frozen=True)
class LimitedInterval:
    """One judged interval in which a client was limited: ``[start, end]`` in Unix seconds."""

    start: float
    end: float
    causes: tuple[str, ...]
    others_cpu: float | None
    """Other processes' CPU on the load generator's machine, in % of a core (the machine's cause)."""


def load_client_limits(prefix: str | list[str]) -> list[LimitedInterval]:
    """The limited intervals of ``PREFIX_llm_history.csv``; none without the file or its columns."""
    first = prefix if isinstance(prefix, str) else prefix[0]
    path = files.prefix_of(first) + files.HISTORY
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    try:
        df = pd.read_csv(path, usecols=lambda c: c in COLUMNS, on_bad_lines="skip")
    except (ValueError, pd.errors.ParserError):
        return []  # the history is the live view's: a report does not fail on it
    if not set(COLUMNS[:2]) <= set(df.columns):
        return []
    return limited_intervals(df)


def limited_intervals(df: pd.DataFrame) -> list[LimitedInterval]:
    """The history's rows (one per scenario and time) as intervals, each time once. Pure."""
    df = df.assign(time=pd.to_numeric(df["time"], errors="coerce")).dropna(subset=["time"])
    times = sorted(set(df["time"]))
    if not times:
        return []
    # The live view samples every HISTORY_INTERVAL_S; a row covers the interval that ends at its time.
    interval = float(pd.Series(times).diff().median()) if len(times) > 1 else 2.0
    limited = df[df["client_limited"].astype(str).str.lower().isin(("true", "1"))]
    out = []
    for t, rows in limited.groupby("time", sort=True):
        causes = tuple(sorted({c for v in rows.get("client_cause", pd.Series(dtype=str)).dropna().astype(str)
                               for c in v.split(",") if c}))
        others = pd.to_numeric(rows.get("client_others_cpu_max", pd.Series(dtype=float)), errors="coerce").max()
        out.append(LimitedInterval(float(t) - interval, float(t), causes or ("process",),
                                   None if pd.isna(others) else float(others)))
    return out


def flag_client_limited_steps(steps: list[Step], limits: list[LimitedInterval], unit: str) -> list[str]:
    """Mark each step whose measured window overlaps a limited interval (``client_limited``); one
    warning per such step. Pure."""
    warnings = []
    for s in steps:
        hit = [i for i in limits if i.end > s.measured_from and i.start < s.end]
        if not hit:
            continue
        causes = sorted({c for i in hit for c in i.causes})
        others = max((i.others_cpu for i in hit if i.others_cpu is not None), default=None)
        s.data["client_limited"] = {"intervals": len(hit), "causes": causes,
                                    "others_cpu_max": None if others is None else round(others, 1),
                                    "at": [round(i.end, 3) for i in hit]}
        if causes == ["machine"]:
            why = "the machine was busy" + (f": other processes used up to {others:.0f} % of a core" if others else "")
        else:
            why = f"cause: {', '.join(causes)}; the run's client verdict (PREFIX_run.json) says what to do"
        every = round(hit[0].end - hit[0].start, 1)
        warnings.append(f"the load generator itself was limited during the step at {s.data['level']:g} {unit} "
                        f"({len(hit)} interval(s) of {every:g} s; {why}): its client-side latencies there include "
                        "time the client lost, not only the server's; rerun that step")
    return warnings
