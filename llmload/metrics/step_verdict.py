"""One step's verdict under the SLOs: the one judge of ``llmload report``, the capacity search and
the SLO stop. Pure (numpy; no pandas, no Locust, no clock).

**The window rule.** A step is judged on the requests that *started* in its judged window
``[measured_from, until)``, cancelled ones left out: ``measured_from`` is the step's first request
at its level plus the warm-up (:func:`measured_from`); ``until`` is where the step's window closes
(the report: the first request of the next step; the search: the moment it closed the step, which
it records in ``PREFIX_run.json`` for the report to use the same).

**The verdict** over those rows (:func:`judge_step`):

* latency SLOs over the ok requests (numpy percentiles), ``error_rate`` over all of them
  (:func:`llmload.metrics.confidence.judge`, which also gives the 95 % interval and "borderline");
* an unscoped SLO over every row; a scoped one (``rag:ttft_p95_ms``) over its scenario's rows,
  keyed ``rag:ttft_p95_ms``, unless the step is of that scenario alone (``scope``), where it is
  keyed by its metric; a model SLO (``adapter-a:ttft_p95_ms``, :func:`llmload.metrics.slo.scope_models`)
  over the rows of that model alone, keyed so. Task SLOs (``task_p95_s``) are judged over tasks
  elsewhere, not here;
* **no verdict** when the step has fewer than ``sample_floor`` ok requests, or a scenario or a
  model with a scoped SLO has fewer there (a thin scenario cannot vouch for its SLO); else
  **broken** (naming every broken SLO) or **met**.

Usage::

    rows = WindowRows.from_tuples(row_tuples)          # or WindowRows(status, scenario, columns)
    v = judge_step(rows, slos, sample_floor=30, scenarios={"chat", "rag"}, duration_s=20.0)
    v.state, v.broken, v.why                           # "broken", ["rag:ttft_p95_ms"], ""
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmload.metrics.confidence import judge
from llmload.metrics.record import CSV_COLUMNS, OK
from llmload.metrics.slo import ERROR_RATE, SLO

MET, BROKEN, NO_VERDICT = "met", "broken", "no verdict"
SAMPLE_FLOOR = 30  # ok requests a step needs for a verdict (`llmload report --sample-floor`)
_COL = {c: i for i, c in enumerate(CSV_COLUMNS)}


def measured_from(first_start: float, warmup_s: float) -> float:
    """Where a step's judged window opens: its first request at its level plus the warm-up."""
    return first_start + warmup_s


@dataclass(frozen=True)
class WindowRows:
    """The requests that started in a step's judged window (cancelled ones left out), by column:
    ``status`` and ``scenario`` (str), the float columns the SLOs read (NaN: no value), and
    ``model`` (str, "" outside a models: mix; None: not known, no model SLO can be judged)."""

    status: np.ndarray
    scenario: np.ndarray
    columns: Mapping[str, np.ndarray]
    model: np.ndarray | None = None

    @classmethod
    def from_tuples(cls, rows: Sequence[tuple], columns: Iterable[str] = ()) -> WindowRows:
        """From ``PREFIX_requests.csv`` rows as tuples (``RequestRecord.row()`` order)."""
        st, sc, md = _COL["status"], _COL["scenario"], _COL["model"]
        out = {c: np.array([np.nan if r[_COL[c]] is None else float(r[_COL[c]]) for r in rows], dtype=float)
               for c in columns}
        return cls(np.array([str(r[st]) for r in rows], dtype=object),
                   np.array([str(r[sc]) for r in rows], dtype=object), out,
                   np.array([(r[md] if len(r) > md else "") or "" for r in rows], dtype=object))

    def __len__(self) -> int:
        return len(self.status)


@dataclass
class StepVerdict:
    state: str  # MET, BROKEN or NO_VERDICT
    broken: list[str] = field(default_factory=list)  # the keys of the broken SLOs
    why: str = ""  # NO_VERDICT: why (``only 12 ok requests (< 30)``)
    slo: dict[str, dict[str, Any]] = field(default_factory=dict)  # key → confidence.judge's verdict
    thin: bool = False  # too few ok requests (in the step, or in a scenario with a scoped SLO)
    ok: int = 0
    requests: int = 0

    @property
    def met(self) -> bool:
        return self.state == MET

    def broken_text(self) -> list[str]:
        """``rag:ttft_p95_ms=1449>1000`` for every broken SLO."""
        return [f"{k}={self.slo[k]['value']:.4g}>{self.slo[k]['limit']:g}" if self.slo[k]["value"] is not None
                else f"{k}: no value" for k in self.broken]


def step_slos(slos: Iterable[SLO], scenarios: Collection[str]) -> list[SLO]:
    """The SLOs a step is judged by: task SLOs left out (judged over tasks), and scoped ones only for
    scenarios the run has (an SLO of a scenario that never ran is warned about, not judged)."""
    return [s for s in slos if not s.per_task and (s.scenario is None or s.scenario in scenarios)]


def judge_step(rows: WindowRows, slos: Sequence[SLO], sample_floor: int, scenarios: Collection[str],
               duration_s: float, scope: str | None = None) -> StepVerdict:
    """The verdict of one step over the rows of its judged window (see the module docstring).
    ``scenarios``: the run's scenarios; ``scope``: the one scenario these rows are of (a section of
    the report, or a run of one scenario), None for the whole run of several."""
    ok = rows.status == OK
    slos = step_slos(slos, scenarios)
    out = StepVerdict(NO_VERDICT, ok=int(ok.sum()), requests=len(rows))
    thin = [] if out.ok >= sample_floor else [f"only {out.ok} ok requests (< {sample_floor})"]
    for slo in slos:
        own = slo.scope is None or (slo.model is None and slo.scenario == scope)
        if slo.model is not None:
            mine = rows.model == slo.model if rows.model is not None else np.zeros(len(rows), dtype=bool)
        else:
            mine = np.ones(len(rows), dtype=bool) if own else rows.scenario == slo.scenario
        key = slo.metric if own else slo.key
        n_ok = int((ok & mine).sum())
        if not own and n_ok < sample_floor and not any(t.startswith(f"{slo.scope}:") for t in thin):
            thin.append(f"{slo.scope}: only {n_ok} ok requests (< {sample_floor})")
        finished = int(mine.sum())
        errors = int((mine & ~ok).sum())
        if slo.column is None:
            values = np.empty(0)
        else:
            col = rows.columns[slo.column][ok & mine]
            values = col[~np.isnan(col)]
        per_s = (finished if slo.metric == ERROR_RATE else n_ok) / duration_s if duration_s > 0 else 0.0
        out.slo[key] = judge(slo, values, errors, finished, per_s)
    out.broken = [k for k, v in out.slo.items() if not v["met"]]
    if thin:
        out.thin, out.why = True, "; ".join(thin)
    elif not slos:
        out.why = "no SLO given"
    else:
        out.state = BROKEN if out.broken else MET
    return out


def monotone_capacity(judged: Iterable[tuple[float, bool]]) -> float | None:
    """The highest level that met every SLO at every step judged there, below the lowest level
    that broke one (a passing level above a failing one is noise, never capacity); None: none.
    ``judged``: (level, met) per step with a verdict."""
    passing: dict[float, bool] = {}
    for level, met in judged:
        passing[level] = passing.get(level, True) and met
    levels = sorted(passing)
    first_fail = next((lv for lv in levels if not passing[lv]), None)
    below = [lv for lv in levels if passing[lv] and (first_fail is None or lv < first_fail)]
    return below[-1] if below else None
