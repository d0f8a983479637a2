"""The capacity search as a load shape: :class:`SearchLoadShape` finds the highest load that meets
every SLO by bisection over measured steps (``--search users|rate --search-min N --search-max N
--search-precision N``), each step held past its warm-up until it has enough requests; then it ends
the run. The bisection and the step judge are pure (:mod:`llmload.shapes.search`); the settings and
the shapes' shared base are :mod:`llmload.shapes.load_shapes`'s.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from llmload.metrics.slo import DEFAULT_ERROR_BUDGET, with_error_budget
from llmload.metrics.step_verdict import BROKEN, MET, NO_VERDICT
from llmload.shapes.load_shapes import SCENARIO_COL, _LLMShape, _Settings
from llmload.shapes.search import MODES, Bisection, Probe, StepSample

log = logging.getLogger("llmload")


class SearchLoadShape(_LLMShape):
    """Bisects for the highest load that meets every SLO (``--slo``, the scenario's ``slo:``, and
    the error budget ``error_rate`` ≤ 1 % unless an ``error_rate`` SLO is given), then ends the run.
    ``search = "users"`` steps the user count; ``"rate"`` the arrival rate of open-loop workloads,
    with ``users`` senders. See :mod:`llmload.shapes.search` for the steps it takes and when a step is done."""

    abstract = True
    search: str = "users"
    search_min: float = 1
    search_max: float = 64
    search_precision: float = 4
    warmup_s: float = 5.0  # as `llmload report --warmup-s` (which reads this run's value from PREFIX_run.json)
    spawn_rate: float = 100.0
    sample_floor: int = 30  # ok requests per step, as the report's --sample-floor
    max_step_seconds: float = 600.0  # a step that cannot reach the floor in this long fails
    users: int = 64  # rate search: senders

    def __init__(self) -> None:
        super().__init__()
        self._clear()

    def reset_time(self) -> None:
        super().reset_time()
        self._clear()  # a new test (the web UI's start after a stop) searches afresh

    def _clear(self) -> None:
        self._search: Bisection | None = None
        self._step: StepSample | None = None
        self._level: float | None = None
        self._step_started = 0.0
        self._settings_cache: dict[str, Any] = {}
        self._scenarios: set[str] = set()  # the run's scenarios, from its rows
        self._closed: tuple[Probe, StepSample] | None = None

    def settings(self) -> dict[str, Any]:
        if not getattr(self, "_settings_cache", None):
            s = _Settings(self)
            mode = str(s.get("search", "search", "search"))
            if mode not in MODES:
                raise ValueError(f"--search {mode!r}: expected one of {', '.join(MODES)}")
            self._settings_cache = {
                "search": mode, "min": float(s.get("search_min", "search_min", "search_min")),
                "max": float(s.get("search_max", "search_max", "search_max")),
                "precision": float(s.get("search_precision", "search_precision", "search_precision")),
                "warmup_s": float(s.get("search_warmup_s", "search_warmup_s", "warmup_s")),
                "spawn_rate": float(s.get("step_spawn_rate", "spawn_rate", "spawn_rate")),
                "sample_floor": int(s.yaml.get("search_sample_floor", self.sample_floor)),
                "max_step_seconds": float(self.max_step_seconds), "control": s.control}
        return self._settings_cache

    def _begin(self, now: float) -> None:
        cfg = self.settings()
        self._slos: list = []
        self._search = Bisection(cfg["min"], cfg["max"], cfg["precision"], integer=cfg["search"] == "users")
        control = cfg["control"]
        slos = list(control.slos()) if control is not None else []
        self._slos = with_error_budget(slos, DEFAULT_ERROR_BUDGET)
        if control is not None:
            control.watch_rows(self._on_rows)
        self._start_step(self._search.next_level(), now)

    def _on_rows(self, rows: list[tuple]) -> None:
        self._scenarios.update(str(r[SCENARIO_COL]) for r in rows)
        if self._closed is not None:  # the step judged last: did any of its window arrive after the verdict?
            probe, sample = self._closed
            late = sample.in_window(rows, probe.judged_until)
            if late:
                probe.late += late
                log.warning("llmload search: %d request(s) of the step at %g arrived after its verdict; "
                            "`llmload report` judges them too (longer steps settle this)", late, probe.level)
        if self._step is not None:
            self._step.add(rows)

    def _start_step(self, level: float | None, now: float) -> None:
        cfg = self.settings()
        warmup = cfg["warmup_s"] if level != self._level else 0.0  # a confirmation at the same load: no change
        self._level = level
        self._step_started = now
        column = "users" if cfg["search"] == "users" else "arrival_rate"
        self._step = None if level is None else StepSample(level, column, now, warmup, self._slos,
                                                           cfg["sample_floor"], self._scenarios)

    def tick(self) -> tuple[int, float] | None:
        cfg = self.settings()
        now = time.time()
        if self._search is None:
            self._begin(now)
        control, step, search = cfg["control"], self._step, self._search
        lag = control.live_lag_s() if control is not None else 0.0
        if step is not None and (step.ready(now, lag) or now - self._step_started > cfg["max_step_seconds"]):
            verdict = step.judge(now, lag)
            broken = verdict.broken_text() if verdict.state != NO_VERDICT else [verdict.why]
            window = (step.measure_from, step.cut(now, lag))
            probe = search.record(verdict.met, broken, verdict.state, window)
            self._closed = (probe, step)
            unit = "users" if cfg["search"] == "users" else "req/s"
            said = {MET: "met every SLO", BROKEN: "broke " + ", ".join(broken)}.get(verdict.state,
                                                                                 "no verdict: " + verdict.why)
            log.info("llmload search: step %d at %g %s: %s", len(search.history), step.level, unit, said)
            self._start_step(search.next_level(), now)
        if self._level is None:
            self._report(self._summary())
            return None
        if cfg["search"] == "rate":
            if control is not None:
                control.set_arrival_rate(self._level)
            return self.users, float(self.users)
        return int(self._level), cfg["spawn_rate"]

    def _summary(self) -> str:
        b, cfg = self._search, self.settings()
        unit = "users" if cfg["search"] == "users" else "req/s arrivals"
        used = f"search: {len(b.history)} steps (at most {b.bound} for {cfg['min']:g}..{cfg['max']:g} " \
               f"to within {cfg['precision']:g})"
        if b.answer is None:
            broken = b.history[-1].broken if b.history else []
            what = f"broke {', '.join(broken)}" if broken else "had no verdict"
            return f"{used}; even the lowest load, {cfg['min']:g} {unit}, {what}"
        if b.confirmed:
            return f"{used}; capacity {b.answer:g} {unit}, confirmed; run `llmload report` on the CSVs for the numbers"
        # As the report states it: a level that broke an SLO at any of its steps is not capacity.
        cap = b.capacity
        found = f"capacity {cap:g} {unit}" if cap is not None else "no capacity"
        return (f"{used}; {found}: {b.answer:g} {unit} NOT confirmed on the second hold (noise or an unstable "
                "server: rerun with more requests per step); run `llmload report` on the CSVs for the numbers")

    def describe(self) -> dict[str, Any]:
        cfg = {k: v for k, v in self.settings().items() if k != "control"}
        if cfg["search"] == "rate":
            cfg["users"] = self.users
        return {**cfg, **(self._search.describe() if getattr(self, "_search", None) else {})}
