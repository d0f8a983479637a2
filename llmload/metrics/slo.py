"""Service-level objectives: the one SLO model of the command line, the scenario files, the live
view, the shapes and the report. Pure; no numpy, no pandas.

An SLO is ``[SCENARIO:]METRIC=VALUE``: METRIC is ``error_rate`` (failed ÷ finished, cancelled
excluded), ``{NAME}_{pNN|mean|median}_ms`` (NAME: a latency metric of ``metrics.catalog`` with
``slo=True``: ttft, ttft_visible, tpot, itl_max, e2e; over ok requests) or ``task_{pNN|mean|median}_s``
(agent workloads: the time to finish a task, over tasks that did not fail; a per-task SLO, judged on
tasks, never on single requests).
A load meets an SLO when the metric's value is ≤ the limit. A scoped SLO (``rag:ttft_p95_ms``)
replaces the unscoped one of the same metric for that scenario. The scope may instead name a model
of a ``models:`` mix (``adapter-a:ttft_p95_ms``): :func:`scope_models` turns it into a model SLO,
judged over that model's requests alone, beside the unscoped SLOs (it replaces none); a name that is
both a scenario and a model is an error.

Usage::

    slo = parse_slo("rag:ttft_p95_ms=2000")   # SLO(metric="ttft_p95_ms", limit=2000.0, scenario="rag")
    slo.name, slo.quantile                     # "ttft", 95.0
    slos_for([slo], "rag")                     # the SLOs that apply to one scenario
    scope_models([parse_slo("adapter-a:ttft_p95_ms=800")], {"chat"}, {"adapter-a"})  # [SLO(..., model="adapter-a")]
    with_error_budget([slo], 0.01)             # + error_rate=0.01 unless an unscoped error_rate is given
    window_value(slo, scenario_stats)          # its value over live histograms (None: too few samples)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from llmload.metrics import catalog

_STAT = r"(p\d+(?:\.\d+)?|mean|median)"
_REQUEST_NAMES = "|".join(m.name for m in catalog.METRICS if m.slo and m.unit == "ms")
_PATTERN = re.compile(rf"^(?:({_REQUEST_NAMES})_{_STAT}_ms|({catalog.TASK.name})_{_STAT}_{catalog.TASK.unit})$")
ERROR_RATE = "error_rate"
TASK = catalog.TASK.name
MIN_SAMPLES = 10  # fewer samples in a live window: no verdict
DEFAULT_ERROR_BUDGET = 0.01  # failed ÷ finished a step may have unless told otherwise: failures count
METRIC_HELP = catalog.slo_help()


def _groups(metric: str) -> tuple[str, str] | None:
    m = _PATTERN.match(metric)
    if m is None:
        return None
    return (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))


@dataclass(frozen=True)
class SLO:
    """One objective; ``scenario`` None applies to every scenario and to the whole run."""

    metric: str
    limit: float
    scenario: str | None = None
    model: str | None = None  # a model of a models: mix: judged over its requests alone (scenario is None)

    @property
    def name(self) -> str | None:
        """The latency metric (``ttft``, or ``task`` for task times), None for error_rate."""
        g = _groups(self.metric)
        return g[0] if g else None

    @property
    def per_task(self) -> bool:
        """A task-time SLO (``task_p95_s``): judged over agent tasks, not request rows."""
        return self.name == TASK

    @property
    def column(self) -> str | None:
        """The request-row column it reads (``ttft_ms``), None for error_rate and task SLOs."""
        metric = catalog.BY_NAME.get(self.name or "")
        return metric.row_column if metric is not None else None

    @property
    def stat(self) -> str | None:
        """``p95``, ``mean`` or ``median``; None for error_rate."""
        g = _groups(self.metric)
        return g[1] if g else None

    @property
    def quantile(self) -> float | None:
        """The percentile in (0, 100], None for a mean or for error_rate."""
        stat = self.stat
        if stat is None or stat == "mean":
            return None
        return 50.0 if stat == "median" else float(stat[1:])

    def met(self, value: float | None) -> bool:
        return value is not None and value == value and value <= self.limit

    @property
    def scope(self) -> str | None:
        """The scenario or the model it is scoped to, None for the whole run."""
        return self.model or self.scenario

    @property
    def key(self) -> str:
        """``metric``, or ``scope:metric`` for a scoped one (the verdict's key)."""
        return f"{self.scope}:{self.metric}" if self.scope else self.metric

    def text(self) -> str:
        return f"{self.key}={self.limit:g}"


def parse_slo(text: str, where: str = "--slo") -> SLO:
    """``[SCENARIO:]METRIC=VALUE`` → SLO; raises ValueError that names ``where`` and the fix."""
    spec = str(text).strip()
    scope, _, rest = spec.rpartition(":") if ":" in spec.split("=", 1)[0] else ("", "", spec)
    metric, sep, value = rest.partition("=")
    metric = metric.strip()
    for synonym in catalog.TASK_SYNONYMS:  # session_p95_s: a call-graph session's makespan is its task time
        if metric.startswith(synonym + "_"):
            metric = TASK + metric[len(synonym):]
    if not sep:
        raise ValueError(f"{where} {text!r}: expected [SCENARIO:]METRIC=VALUE, e.g. ttft_p95_ms=2000")
    match = _PATTERN.match(metric)
    if metric != ERROR_RATE and not match:
        raise ValueError(f"{where} {text!r}: unknown metric {metric!r}; expected {METRIC_HELP}")
    try:
        limit = float(value)
    except ValueError:
        limit = float("nan")
    if not limit >= 0:
        raise ValueError(f"{where} {text!r}: the limit must be a number >= 0, got {value.strip()!r}")
    if metric == ERROR_RATE and limit > 1:
        raise ValueError(f"{where} {text!r}: error_rate is a fraction between 0 and 1")
    stat = _groups(metric)[1] if match else None
    if stat and stat.startswith("p") and not 0 < float(stat[1:]) <= 100:
        raise ValueError(f"{where} {text!r}: percentile must be in (0, 100]")
    return SLO(metric=metric, limit=limit, scenario=scope.strip() or None)


def scope_models(slos: Iterable[SLO], scenarios: Iterable[str], models: Iterable[str],
                 where: str = "--slo") -> list[SLO]:
    """The SLOs with each scope that names a model (and no scenario) made a model SLO. Raises
    ValueError for a scope that is both a scenario and a model, or a task SLO scoped to a model."""
    scenarios, models = set(scenarios), set(models)
    out = []
    for s in slos:
        if s.scenario is not None and s.scenario in models:
            if s.scenario in scenarios:
                raise ValueError(f"{where} {s.text()}: {s.scenario!r} is both a scenario and a model of a models: mix; "
                                 "rename the workload or the model so the scope names one")
            if s.per_task:
                raise ValueError(f"{where} {s.text()}: a task SLO is judged over a scenario's tasks, not over a "
                                 f"model's requests; scope it to a scenario, not to {s.scenario!r}")
            s = SLO(s.metric, s.limit, None, s.scenario)
        out.append(s)
    return out


def task_limit_s(slos: Iterable[SLO], scenario: str) -> float | None:
    """The limit of the task SLO that applies to a scenario (the tightest, if several), in seconds."""
    limits = [s.limit for s in slos_for(slos, scenario) if s.per_task]
    return min(limits) if limits else None


def slos_for(slos: Iterable[SLO], scenario: str | None) -> list[SLO]:
    """The SLOs that apply to a scenario (None: the whole run: the unscoped SLOs); model SLOs apply
    wherever that model's requests are (judged over those alone), and replace none."""
    slos = list(slos)
    if scenario is None:
        return [s for s in slos if s.scenario is None]
    scoped = {s.metric for s in slos if s.scenario == scenario}
    return [s for s in slos if s.scenario == scenario
            or (s.scenario is None and (s.model is not None or s.metric not in scoped))]


def with_error_budget(slos: Iterable[SLO], budget: float | None) -> list[SLO]:
    """``slos`` plus the error budget ``error_rate ≤ budget`` for the whole run, unless an unscoped
    ``error_rate`` SLO is already there (it wins); ``budget`` None: no budget (switched off)."""
    slos = list(slos)
    if budget is None or any(s.metric == ERROR_RATE and s.scope is None for s in slos):
        return slos
    return [*slos, SLO(ERROR_RATE, budget)]


def parse_error_budget(text: str | float | None, where: str = "--error-budget") -> float | None:
    """``0.01`` → 0.01; ``off`` (or ``none``) → None; empty → the default."""
    if text is None or str(text).strip() == "":
        return DEFAULT_ERROR_BUDGET
    if str(text).strip().lower() in ("off", "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise ValueError(f"{where} {text!r}: expected a fraction between 0 and 1 (e.g. 0.01), or off")
    return value


class _Hist(Protocol):
    count: int

    @property
    def mean(self) -> float: ...

    def percentile(self, q: float) -> float: ...


class WindowStats(Protocol):
    """What live evaluation needs of :class:`llmload.metrics.scenario_stats.ScenarioStats`."""

    hist: dict[str, _Hist]
    status_counts: dict[str, int]

    @property
    def requests(self) -> int: ...

    @property
    def ok(self) -> int: ...


def window_value(slo: SLO, s: WindowStats, min_samples: int = MIN_SAMPLES) -> float | None:
    """The SLO's metric over a live window's histograms; None when there are too few samples."""
    if slo.metric == ERROR_RATE:
        finished = s.requests - s.status_counts.get("cancelled", 0)
        return (finished - s.ok) / finished if finished >= min_samples else None
    h = s.hist.get(slo.name or "")
    if h is None or h.count < min_samples:
        return None
    q = slo.quantile
    return h.mean if q is None else h.percentile(q)

