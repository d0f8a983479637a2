"""The capacity search: its bisection (pure), its step judge, and the shape driven by a fake clock."""

from __future__ import annotations

import math
import types

import pytest

from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.slo import SLO
from llmload.shapes.load_shapes import DEFAULT_STOP_TIMEOUT_S, StepLoadShape
from llmload.shapes.search import Bisection, StepSample, step_bound
from llmload.shapes.search_shape import SearchLoadShape


def run_search(lo, hi, precision, knee, integer=True):
    """Bisect against an oracle: a level passes when it is at most ``knee``."""
    b = Bisection(lo, hi, precision, integer)
    for _ in range(100):
        level = b.next_level()
        if level is None:
            return b
        b.record(level <= knee, [] if level <= knee else ["ttft_p95_ms=500>200"])
    raise AssertionError("the search did not end")


def test_bisection_by_hand():
    # [4, 36] to 4: probes 20 ✗ → [4, 20], 12 ✓ → [12, 20], 16 ✓ → [16, 20] (width 4): confirm 16.
    # ⌈log2(32 / 4)⌉ + 2 = 5 steps at most; this one used 4.
    b = run_search(4, 36, 4, knee=16)
    assert [(p.level, p.kind, p.passed) for p in b.history] == [
        (20, "probe", False), (12, "probe", True), (16, "probe", True), (16, "confirm", True)]
    assert b.answer == 16 and b.confirmed and step_bound(4, 36, 4) == 5
    # Every probe passes: 20, 28, 32 ✓ → [32, 36]; 36 was never measured, so it is (✓), then confirmed.
    b = run_search(4, 36, 4, knee=100)
    assert [p.level for p in b.history] == [20, 28, 32, 36, 36] and b.answer == 36
    # Every probe fails: 20, 12, 8 ✗ → [4, 8]; 4 was never measured: it fails too, no capacity.
    b = run_search(4, 36, 4, knee=2)
    assert [p.level for p in b.history] == [20, 12, 8, 4] and b.answer is None and b.confirmed is None
    # Rates bisect exactly: [1, 9] to 1 req/s → 5 ✓, 7 ✗, 6 ✓ → [6, 7]: confirm 6.
    b = run_search(1.0, 9.0, 1.0, knee=6.5, integer=False)
    assert [p.level for p in b.history] == [5.0, 7.0, 6.0, 6.0] and b.answer == 6.0


@pytest.mark.parametrize("lo,hi,precision,integer", [(4, 36, 4, True), (1, 64, 1, True), (1, 100, 7, True),
                                                     (2, 3, 1, True), (5, 9, 10, True), (0.5, 40.0, 0.25, False)])
def test_bisection_stays_within_its_bound_and_precision(lo, hi, precision, integer):
    knees = [lo - 1, hi + 1] + ([*range(int(lo), int(hi) + 1)] if integer else
                                [lo + (hi - lo) * i / 53 for i in range(54)])
    for knee in knees:
        b = run_search(lo, hi, precision, knee, integer)
        assert len(b.history) <= step_bound(lo, hi, precision) == math.ceil(math.log2(max(
            (hi - lo) / precision, 1))) + 2
        if knee < lo:
            assert b.answer is None
        else:
            truth = min(knee, hi)
            assert b.answer <= truth and truth - b.answer <= precision and b.confirmed


def test_bisection_rejects_a_bad_bracket():
    with pytest.raises(ValueError, match="--search-max > --search-min"):
        Bisection(8, 8, 1, True)
    with pytest.raises(ValueError, match="whole number of users"):
        Bisection(1, 8, 0.5, True)


def row(start, users, ttft, e2e=500.0, status="ok", rate=None, scenario="chat"):
    meta = RequestMeta("r", start, scenario, users=users, arrival_rate=rate)
    return RequestRecord(meta, status, ttft_ms=ttft, e2e_ms=e2e).row()


def test_step_sample_waits_for_slow_requests_and_judges_like_the_report():
    """Set at t = 95, warm-up 5 s. The level is reached at 96.0 (rows at 12 users before that are the
    ramp): the window starts at 101.0. Requests take 0.5 s."""
    s = StepSample(16, "users", 95.0, 5.0, [SLO("ttft_p95_ms", 200.0), SLO("error_rate", 0.01)], floor=30)
    s.add([row(95.0 + i * 0.1, 12, 50.0) for i in range(10)])  # still the last level
    s.add([row(96.0 + i * 0.1, 16, 50.0) for i in range(90)])  # 96.0 .. 104.9
    s.add([row(101.5, 16, 50.0, status="cancelled")])
    assert len(s.rows) == 90 and s.measure_from == 101.0
    # Settled: started in [101, now − lag − 1.5 × 0.5 s): at now 105.75, lag 1, that is 101.0 .. 103.9 = 30.
    assert len(s.settled(105.75, 1.0)) == 30 and s.ready(105.75, 1.0)
    assert s.verdict(105.75, 1.0) == (True, [])
    s.add([row(103.5, 16, 900.0, e2e=3000.0) for _ in range(3)])  # slow ones arrive: the cut moves back
    assert not s.ready(105.75, 1.0)
    # At 112 all 43 are in; 3 of them at 900 ms put the p95 (rank 39.9 of 0..42) at 50 + 0.9 × 850 = 815.
    assert s.verdict(112.0, 1.0) == (False, ["ttft_p95_ms=815>200"])


class FakePlugin:
    """A ShapeControl (llmload.shapes.control) that records what the shape asks."""

    def __init__(self, slos):
        self._slos = slos
        self.stop_reason = ""
        self.run = types.SimpleNamespace(listeners=[])
        self.rates = []

    def shape_settings(self):
        return {}

    def slos(self):
        return self._slos

    def live_window(self, now):
        raise AssertionError("the search shape judges its own steps, not the live window")

    def live_lag_s(self):
        return 1.0

    def set_arrival_rate(self, rate):
        self.rates.append(rate)

    def stopped_because(self, text):
        self.stop_reason = text

    def watch_rows(self, listener):
        if listener not in self.run.listeners:
            self.run.listeners.append(listener)


def make_shape(cls, plugin, **opts):
    shape = cls()
    env = types.SimpleNamespace(parsed_options=types.SimpleNamespace(**opts), llmload_shapes=plugin,
                                stop_timeout=0.0)
    shape.runner = types.SimpleNamespace(environment=env)
    return shape


class Search(SearchLoadShape):
    search_min = 4
    search_max = 36
    search_precision = 4


def test_search_shape_finds_the_knee_and_says_how_many_steps(monkeypatch):
    """Requests take 0.5 s; TTFT is 50 ms up to 16 users and 500 ms above: with a 200 ms p95 SLO the
    search goes 20 ✗, 12 ✓, 16 ✓, then holds 16 once more, and stops."""
    plugin = FakePlugin([SLO("ttft_p95_ms", 200.0)])
    shape = make_shape(Search, plugin, search_warmup_s=2.0)
    clock = {"now": 1000.0}
    monkeypatch.setattr("llmload.shapes.load_shapes.time.time", lambda: clock["now"])
    shape.reset_time()
    assert shape.runner.environment.stop_timeout == DEFAULT_STOP_TIMEOUT_S
    levels = []
    for _ in range(400):
        got = shape.tick()
        if got is None:
            break
        users, _rate = got
        levels.append(users)
        now = clock["now"]
        rows = [row(now + i * 0.05, users, 50.0 if users <= 16 else 500.0) for i in range(20)]
        for listener in plugin.run.listeners:
            listener(rows)
        clock["now"] += 1.0
    else:
        raise AssertionError("the search did not end")
    assert [k for i, k in enumerate(levels) if i == 0 or levels[i - 1] != k] == [20, 12, 16]
    assert plugin.stop_reason.startswith("search: 4 steps (at most 5 for 4..36 to within 4)")
    assert "capacity 16 users, confirmed" in plugin.stop_reason
    info = shape.describe()
    assert info["warmup_s"] == 2.0 and info["answer"] == 16 and [s["level"] for s in info["steps"]] == [20, 12, 16, 16]


def test_rate_search_sets_the_arrival_rate(monkeypatch):
    plugin = FakePlugin([SLO("ttft_p95_ms", 200.0)])

    class RateSearch(SearchLoadShape):
        search = "rate"
        users = 32

    shape = make_shape(RateSearch, plugin, search_min=1.0, search_max=9.0, search_precision=1.0)
    monkeypatch.setattr("llmload.shapes.load_shapes.time.time", lambda: 1000.0)
    shape.reset_time()
    assert shape.tick() == (32, 32.0) and plugin.rates == [5.0]


def test_every_shape_gets_a_default_stop_timeout_unless_one_is_given():
    shape = make_shape(StepLoadShape, FakePlugin([]))
    shape.reset_time()
    assert shape.runner.environment.stop_timeout == DEFAULT_STOP_TIMEOUT_S
    given = make_shape(StepLoadShape, FakePlugin([]))
    given.runner.environment.stop_timeout = 7.0
    given.reset_time()
    assert given.runner.environment.stop_timeout == 7.0
