"""The SLO stop of the step shape (``--slo-stop-after S``): each step judged as ``llmload report``
will judge it, and when the run should stop. Pure (no Locust, no clock: ``now`` is passed in).

Each step is a :class:`~llmload.shapes.search.StepSample`: the requests that started at its level
after the warm-up (``--search-warmup-s``, counted from its first request, as the report does),
cancelled ones left out, judged by :func:`llmload.metrics.step_verdict.judge_step` with the
report's sample floor, every SLO (``--slo``, the scenario's ``slo:``, scenario-scoped ones on
their scenario's rows) and the report's error budget (``error_rate`` ≤ 1 % unless an
``error_rate`` SLO is given). The step that decides is the current one once it has a verdict,
until then the one before it (whose late rows still count). When that verdict has stayed
*broken* for S seconds, :meth:`SLOStop.check` says so; a *met* verdict clears it. The last step
whose own verdict is *met* is where ``--slo-stop-action hold`` goes back to.

Usage::

    stop = SLOStop(slos, after_s=10, warmup_s=5, floor=30)
    stop.add(rows)                                     # every batch of request rows
    if stop.check(index, users, time.time(), lag_s):   # once a tick
        stop.broken, stop.broken_level, stop.last_good(steps, index)
"""

from __future__ import annotations

from collections.abc import Sequence

from llmload.metrics.record import CSV_COLUMNS
from llmload.metrics.slo import DEFAULT_ERROR_BUDGET, SLO, with_error_budget
from llmload.metrics.step_verdict import BROKEN, MET, NO_VERDICT, SAMPLE_FLOOR, StepVerdict
from llmload.shapes.search import StepSample

_SCENARIO = CSV_COLUMNS.index("scenario")


class SLOStop:
    def __init__(self, slos: Sequence[SLO], after_s: float, warmup_s: float, floor: int = SAMPLE_FLOOR,
                 action: str = "stop") -> None:
        self.slos = with_error_budget(slos, DEFAULT_ERROR_BUDGET) if slos else []
        self.after_s, self.warmup_s, self.floor, self.action = after_s, warmup_s, floor, action
        self.samples: dict[int, StepSample] = {}  # step index → its rows (the current and the one before)
        self.verdicts: dict[int, StepVerdict] = {}  # step index → its latest verdict
        self.scenarios: set[str] = set()  # the run's, from its rows
        self._judged: dict[int, tuple] = {}  # past step → (rows, latest start) judged with every row settled
        self.broken_since: float | None = None
        self.broken: list[str] = []  # the deciding step's broken SLOs, as metric=value>limit
        self.broken_level: float | None = None

    def reset(self) -> None:
        """A new test (the web UI's start after a stop): judge afresh."""
        self.samples.clear()
        self.verdicts.clear()
        self._judged.clear()
        self.broken_since, self.broken, self.broken_level = None, [], None

    def add(self, rows: list[tuple]) -> None:
        self.scenarios.update(str(r[_SCENARIO]) for r in rows)
        for sample in self.samples.values():
            sample.add(rows)

    def check(self, index: int, level: float, now: float, lag_s: float) -> bool:
        """Judge the steps at ``now``; True once the deciding step has been broken for ``after_s``."""
        if not self.slos:
            return False
        if index not in self.samples:
            self.samples[index] = StepSample(level, "users", now, self.warmup_s, self.slos, self.floor,
                                             self.scenarios)
            for old in [i for i in self.samples if i < index - 1]:
                del self.samples[old]  # two steps back: its rows have all arrived
        for i, sample in self.samples.items():
            if i < index and self._settled(i, sample, now, lag_s):
                continue  # every row of it was judged already: its verdict cannot change
            self.verdicts[i] = sample.judge(now, lag_s)
        deciding = index if self.verdicts[index].state != NO_VERDICT else index - 1
        verdict = self.verdicts.get(deciding)
        if verdict is None or verdict.state != BROKEN:  # met, or nothing to judge yet
            self.broken_since, self.broken = None, []
            return False
        self.broken = verdict.broken_text()
        self.broken_level = self.samples[deciding].level if deciding in self.samples else level
        if self.broken_since is None:
            self.broken_since = now
        return now - self.broken_since >= self.after_s

    def _settled(self, index: int, sample: StepSample, now: float, lag_s: float) -> bool:
        """True when a past step was judged already over every row it has (judging costs O(rows))."""
        seen = (len(sample.rows), sample.last_start)
        if self._judged.get(index) == seen:
            return True
        if sample.last_start is None or sample.cut(now, lag_s) > sample.last_start:
            self._judged[index] = seen  # the judgement about to be made covers every row
        return False

    def last_good(self, steps: Sequence[int], index: int) -> int | None:
        """The user count of the last step before ``index`` whose verdict is met (None: none)."""
        good = [steps[i] for i in sorted(self.verdicts) if i < index and self.verdicts[i].state == MET]
        return good[-1] if good else None
