"""Shape schedules, the live window, live SLO checks, the SLO stop logic and client health."""

from __future__ import annotations

import types

import pytest

from llmload.health.verdict import is_limited
from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.slo import SLO, broken_slos, window_value
from llmload.metrics.stats import ScenarioStats
from llmload.plugin.live import LiveWindow
from llmload.shapes.load_shapes import RampLoadShape, RateLadderShape, StepLoadShape
from llmload.shapes.schedules import parse_rates, parse_steps, ramp_schedule, step_schedule


def merged_total(per):
    total = ScenarioStats()
    for s in per.values():
        total.merge(s)
    return total


def test_step_schedule():
    steps = (4, 8, 16)
    assert [step_schedule(t, steps, 10) for t in (0, 9.99, 10, 25, 29.9)] == [4, 4, 8, 16, 16]
    assert step_schedule(30, steps, 10) is None
    assert step_schedule(-1, steps, 10) == 4
    assert parse_steps("4, 8,16") == (4, 8, 16)
    for bad in ("", "4,x", "4,-1", "0"):
        with pytest.raises(ValueError, match="--steps"):
            parse_steps(bad)
    assert parse_rates("0.5,2") == (0.5, 2.0)
    with pytest.raises(ValueError, match="--rate-steps"):
        parse_rates("1,0")


def test_ramp_schedule():
    assert [ramp_schedule(t, 0, 100, 100, 20) for t in (0, 25, 50, 99.9, 100, 119)] == [0, 25, 50, 100, 100, 100]
    assert ramp_schedule(120, 0, 100, 100, 20) is None
    assert ramp_schedule(5, 10, 2, 10, 0) == 6  # ramps down too
    assert ramp_schedule(0, 1, 8, 0, 5) == 8


def row(scenario, start, ttft, status="ok", e2e=1000.0, tokens=10):
    rec = RequestRecord(meta=RequestMeta("r", start, scenario), status=status, ttft_ms=ttft, tpot_ms=5.0,
                        e2e_ms=e2e, itl_max_ms=9.0, prompt_tokens=100, cached_tokens=50, completion_tokens=tokens)
    return rec.row()


def test_live_window_rates_percentiles_and_lag():
    live = LiveWindow(window_s=10)
    for i in range(100):  # completions at t = 1001.0 .. 1010.9, ttft 1..100 ms
        live.add_row(row("chat", 1000 + i * 0.1, float(i + 1)))
    live.add_row(row("chat", 1005, None, status="timeout", e2e=500.0))
    rows = live.snapshot(now=1013.0, lag_s=2.0)  # window [1001, 1011)
    (chat,) = rows
    assert chat["ok"] == 100 and chat["errors"] == 1 and chat["errors_by_status"] == {"timeout": 1}
    assert chat["rps"] == 10.0 and chat["output_tps"] == 100.0
    assert chat["ttft_p50_ms"] == pytest.approx(50, rel=0.01) and chat["ttft_p99_ms"] == pytest.approx(99, rel=0.01)
    assert chat["cache_hit_ratio"] == 0.5 and chat["itl_max_max_ms"] == 9.0
    assert chat["worst_stall_ms"] == 9.0  # the old name, deprecated, kept one release
    empty = live.snapshot(now=1030.0, lag_s=2.0)
    assert len(empty) == 1 and empty[0]["scenario"] == "Aggregated" and empty[0]["requests"] == 0
    live.add_row(row("rag", 1005, 500.0))
    names = [r["scenario"] for r in live.snapshot(now=1013.0, lag_s=2.0)]
    assert names == ["chat", "rag", "Aggregated"]
    live.prune(now=2000.0)
    assert live.snapshot(now=1013.0, lag_s=2.0)[0]["requests"] == 0


def test_live_slo_values_need_enough_samples():
    live = LiveWindow()
    for i in range(5):
        live.add_row(row("chat", 1005 + i * 0.1, 3000.0))  # complete at 1006.x
    per, _ = live.merged(1012, 0)
    slo = SLO("ttft_p95_ms", 2000.0)
    assert window_value(slo, per["chat"]) is None  # 5 < MIN_SAMPLES: no verdict yet
    for i in range(10):
        live.add_row(row("chat", 1006 + i * 0.1, 3000.0))
    per, _ = live.merged(1012, 0)
    total = merged_total(per)
    assert window_value(slo, per["chat"]) == pytest.approx(3000, rel=0.01)
    assert broken_slos([slo], per, total) == ["ttft_p95_ms=3000>2000"]
    assert broken_slos([SLO("ttft_p95_ms", 2000.0, "rag")], per, total) == []  # no rag traffic
    assert broken_slos([SLO("tpot_p99_ms", 10.0, "chat")], per, total) == []
    assert window_value(SLO("error_rate", 0.1), per["chat"]) == 0.0


class FakePlugin:
    """A ShapeControl (llmload.shapes.control) over a real live window."""

    def __init__(self, slos):
        self.live = LiveWindow()
        self._slos = slos
        self.stop_reason = ""
        self.rates = []

    def shape_settings(self):
        return {}

    def slos(self):
        return self._slos

    def live_window(self, now):
        return self.live.merged(now, self.live_lag_s())[0]

    def live_lag_s(self):
        return 0.0

    def set_arrival_rate(self, rate):
        self.rates.append(rate)

    def stopped_because(self, text):
        self.stop_reason = text

    def watch_rows(self, listener):
        raise AssertionError("only the search shape watches rows")


def make_shape(cls, plugin, **opts):
    shape = cls()
    env = types.SimpleNamespace(parsed_options=types.SimpleNamespace(**opts), llmload_shapes=plugin)
    shape.runner = types.SimpleNamespace(environment=env)
    return shape


class Steps(StepLoadShape):
    steps = (4, 8, 16)
    step_seconds = 10
    slo_stop_after_s = 3


def test_step_shape_slo_stop_ends_the_run(monkeypatch):
    plugin = FakePlugin([SLO("ttft_p95_ms", 100.0)])
    shape = make_shape(Steps, plugin)
    clock = {"run": 0.0, "now": 5000.0}
    monkeypatch.setattr(shape, "get_run_time", lambda: clock["run"])
    monkeypatch.setattr("llmload.shapes.load_shapes.time.time", lambda: clock["now"])

    def at(run_s, ttft):
        clock["run"], clock["now"] = run_s, 5000.0 + run_s
        for i in range(20):
            plugin.live.add_row(row("chat", clock["now"] - 1.0 + i * 0.01, ttft, e2e=10.0))
        return shape.tick()

    assert at(1, 50.0) == (4, 100.0)
    assert at(11, 60.0) == (8, 100.0)
    assert at(21, 500.0) == (16, 100.0)  # broken, but not for 3 s yet
    assert at(22, 500.0) == (16, 100.0)
    assert at(24, 500.0) is None  # broken for 3 s: the run ends
    assert "SLO stop" in plugin.stop_reason and "last step that met every SLO: 8 users" in plugin.stop_reason


def test_step_shape_hold_goes_back_to_the_last_good_step(monkeypatch):
    plugin = FakePlugin([SLO("ttft_p95_ms", 100.0)])
    shape = make_shape(Steps, plugin, slo_stop_action="hold")
    clock = {"run": 0.0}
    monkeypatch.setattr(shape, "get_run_time", lambda: clock["run"])
    monkeypatch.setattr("llmload.shapes.load_shapes.time.time", lambda: 5000.0 + clock["run"])
    for t, ttft in ((1, 50.0), (11, 50.0), (21, 500.0), (25, 500.0)):
        clock["run"] = t
        for i in range(20):
            plugin.live.add_row(row("chat", 5000.0 + t - 1.0 + i * 0.01, ttft, e2e=10.0))
        last = shape.tick()
    assert last == (8, 100.0) and "holding" in plugin.stop_reason
    clock["run"] = 29
    assert shape.tick() == (8, 100.0)
    clock["run"] = 30
    assert shape.tick() is None


def test_cli_options_override_the_class_and_ramp_and_ladder_shapes(monkeypatch):
    shape = make_shape(Steps, FakePlugin([]), steps="2,3", step_seconds=5.0, step_spawn_rate=7.0)
    monkeypatch.setattr(shape, "get_run_time", lambda: 6.0)
    assert shape.tick() == (3, 7.0)

    class Ramp(RampLoadShape):
        ramp_users = 10
        ramp_seconds = 10

    r = make_shape(Ramp, FakePlugin([]))
    monkeypatch.setattr(r, "get_run_time", lambda: 5.0)
    assert r.tick() == (6, 1.8)  # 1 → 10 over 10 s: half way ≈ 6, spawning at twice the ramp rate

    class Ladder(RateLadderShape):
        users = 20
        rate_steps = (1.0, 4.0)
        step_seconds = 10

    plugin = FakePlugin([])
    ladder = make_shape(Ladder, plugin)
    monkeypatch.setattr(ladder, "get_run_time", lambda: 12.0)
    assert ladder.tick() == (20, 20.0) and plugin.rates == [4.0]


def test_client_health_thresholds():
    assert not is_limited(50.0, 2.0)
    assert is_limited(95.0, 0.0)
    assert is_limited(10.0, 25.0)
