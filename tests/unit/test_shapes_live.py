"""Shape schedules, the live window, live SLO checks, the SLO stop logic and client health."""

from __future__ import annotations

import types

import pytest

from llmload.health.verdict import is_limited
from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.scenario_stats import ScenarioStats
from llmload.metrics.slo import SLO, window_value
from llmload.plugin.output.live import LiveWindow
from llmload.shapes.load_shapes import RampLoadShape, RateLadderShape, StepLoadShape
from llmload.shapes.schedules import parse_rates, parse_steps, ramp_schedule, step_schedule
from llmload.shapes.slo_stop import SLOStop
from llmload.workload.file.scenario import ScenarioError, parse_scenario


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
    assert window_value(slo, total) == pytest.approx(3000, rel=0.01)
    assert window_value(SLO("error_rate", 0.1), per["chat"]) == 0.0


class FakePlugin:
    """A ShapeControl (llmload.shapes.control) that hands rows to the shapes' listeners."""

    def __init__(self, slos):
        self.live = LiveWindow()
        self._slos = slos
        self.stop_reason = ""
        self.rates = []
        self.listeners = []

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
        if listener not in self.listeners:
            self.listeners.append(listener)


def make_shape(cls, plugin, **opts):
    shape = cls()
    env = types.SimpleNamespace(parsed_options=types.SimpleNamespace(**opts), llmload_shapes=plugin,
                                stop_timeout=5.0)
    shape.runner = types.SimpleNamespace(environment=env)
    return shape


class Steps(StepLoadShape):
    steps = (4, 8, 16)
    step_seconds = 10
    slo_stop_after_s = 3
    warmup_s = 1.0
    sample_floor = 10


def drive(monkeypatch, shape, plugin, ttft_of, until_s):
    """Tick once a second from run time 0 (epoch 5000); after each tick 20 requests start at the
    step's level within 0.2 s and take 10 ms (``ttft_of(users, scenario)``; chat and rag by turns).
    Returns the ticks' answers, up to the first None."""
    clock = {"run": 0.0}
    monkeypatch.setattr(shape, "get_run_time", lambda: clock["run"])
    monkeypatch.setattr("llmload.shapes.load_shapes.time.time", lambda: 5000.0 + clock["run"])
    shape.reset_time()
    got = []
    for t in range(until_s + 1):
        clock["run"] = float(t)
        answer = shape.tick()
        got.append(answer)
        if answer is None:
            break
        users = answer[0]
        rows = []
        for i in range(20):
            scenario = "rag" if i % 2 else "chat"
            meta = RequestMeta(f"r{t}-{i}", 5000.0 + t + i * 0.01, scenario, users=users)
            rows.append(RequestRecord(meta, "ok", ttft_ms=ttft_of(users, scenario), e2e_ms=10.0).row())
        for listener in plugin.listeners:
            listener(rows)
    return got


def test_step_shape_slo_stop_ends_the_run(monkeypatch):
    """TTFT 50 ms up to 8 users, 500 ms at 16 (from run time 20). The 16-user step has a verdict
    once its first second past the 1-s warm-up has settled (t = 22): broken; 3 s later the run ends."""
    plugin = FakePlugin([SLO("ttft_p95_ms", 100.0)])
    shape = make_shape(Steps, plugin)
    got = drive(monkeypatch, shape, plugin, lambda users, _s: 50.0 if users <= 8 else 500.0, 29)
    assert got[:25] == [(4, 100.0)] * 10 + [(8, 100.0)] * 10 + [(16, 100.0)] * 5 and got[25] is None
    assert "SLO stop: ttft_p95_ms=500>100 for 3 s at 16 users" in plugin.stop_reason
    assert "last step that met every SLO: 8 users" in plugin.stop_reason
    assert shape.describe()["warmup_s"] == 1.0


def test_step_shape_hold_goes_back_to_the_last_good_step(monkeypatch):
    plugin = FakePlugin([SLO("ttft_p95_ms", 100.0)])
    shape = make_shape(Steps, plugin, slo_stop_action="hold")
    got = drive(monkeypatch, shape, plugin, lambda users, _s: 50.0 if users <= 8 else 500.0, 30)
    assert got[25:30] == [(8, 100.0)] * 5 and got[30] is None  # held to the end of the schedule
    assert "holding the last step that met every SLO, 8 users" in plugin.stop_reason


def test_the_slo_stop_judges_scenario_scoped_slos_on_their_scenario(monkeypatch):
    """At 16 users rag's TTFT is 500 ms, chat's 50 ms: the whole run's p95 (500) holds its 1,000-ms
    SLO, but rag's own 100-ms SLO breaks, on rag's rows of the same window: the run stops."""
    slos = [SLO("ttft_p95_ms", 1000.0), SLO("ttft_p95_ms", 100.0, "rag")]
    plugin = FakePlugin(slos)
    shape = make_shape(Steps, plugin)
    got = drive(monkeypatch, shape, plugin,
                lambda users, s: 500.0 if users > 8 and s == "rag" else 50.0, 29)
    assert got[25] is None, got
    assert "SLO stop: rag:ttft_p95_ms=500>100 for 3 s at 16 users" in plugin.stop_reason
    # the scoped SLO alone holds where rag is fast: the schedule runs to its end
    plugin = FakePlugin(slos)
    shape = make_shape(Steps, plugin)
    got = drive(monkeypatch, shape, plugin, lambda users, s: 500.0 if s == "chat" else 50.0, 30)
    assert got[29] == (16, 100.0) and got[30] is None and plugin.stop_reason == ""


def test_a_step_without_a_verdict_never_stops_the_run(monkeypatch):
    class Thin(Steps):
        sample_floor = 1000  # never reached: no verdict, as the report would say ("too few requests")

    plugin = FakePlugin([SLO("ttft_p95_ms", 100.0)])
    shape = make_shape(Thin, plugin)
    got = drive(monkeypatch, shape, plugin, lambda _u, _s: 500.0, 30)
    assert got[29] == (16, 100.0) and got[30] is None and plugin.stop_reason == ""


def test_the_slo_stop_judges_late_rows_of_the_step_before():
    """A past step's verdict is not judged again while none of its rows change, but late rows of it
    (started in its window, arriving in the next step) are judged: they can break it."""
    stop = SLOStop([SLO("ttft_p95_ms", 100.0)], after_s=0.0, warmup_s=0.0, floor=10)

    def rows(start, users, ttft):
        return [RequestRecord(RequestMeta(f"r{start}-{i}", start + i * 0.01, "chat", users=users), "ok",
                              ttft_ms=ttft, e2e_ms=10.0).row() for i in range(20)]

    assert not stop.check(0, 4, 1000.0, 0.0)
    stop.add(rows(1000.0, 4, 50.0))
    assert not stop.check(0, 4, 1001.0, 0.0) and stop.verdicts[0].state == "met"
    assert not stop.check(1, 8, 1002.0, 0.0) and not stop.check(1, 8, 1003.0, 0.0)
    assert stop.last_good((4, 8), 1) == 4
    stop.add(rows(1000.5, 4, 500.0))  # late: 4-user requests of the first step
    assert stop.check(1, 8, 1004.0, 0.0)  # the step before decides while this one has no verdict
    assert stop.broken == ["ttft_p95_ms=500>100"] and stop.broken_level == 4 and stop.last_good((4, 8), 1) is None


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


def test_a_scenario_shape_takes_the_search_and_warm_up_keys_the_docs_list():
    text = ("shape: {steps: [2, 4], slo_stop_after_s: 1, search_warmup_s: 1, search: users, search_min: 2, "
            "search_max: 8, search_precision: 2, search_sample_floor: 20}\n"
            "workloads:\n  chat:\n    input_tokens: 20\n    output_tokens: 10\n")
    shape = parse_scenario(text, "s.yaml").shape
    assert shape["search_warmup_s"] == 1 and shape["search_sample_floor"] == 20 and shape["search"] == "users"
    with pytest.raises(ScenarioError, match="shape.search_warmup: unknown key"):
        parse_scenario(text.replace("search_warmup_s", "search_warmup"), "s.yaml")
