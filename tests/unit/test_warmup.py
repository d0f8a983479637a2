"""The explicit warm-up phase: its options, the schedule of the shape wrapper in front of a shape or
a plain run, the rows it marks, and that no verdict (live window, search step, report) judges them."""

from __future__ import annotations

import math
import types

import pytest

from llmload.files import COL, WARMUP_PHASE
from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.slo import SLO
from llmload.metrics.stats import LLMStats
from llmload.plugin.output.end_of_run import end_of_run_text
from llmload.plugin.output.live import LiveHistory, LiveWindow
from llmload.report import ReportOptions, build_report, parse_slo
from llmload.shapes.load_shapes import StepLoadShape
from llmload.shapes.search import StepSample
from llmload.shapes.warmup import WarmupPlan, WarmupRows, after_warmup, parse_warmup
from llmload.shapes.warmup_shape import WarmupShape
from tests.support.report_rows import req, write_csv


def test_warmup_options_parse_and_bad_ones_name_the_flag():
    assert parse_warmup("", "", "") is None
    assert parse_warmup("30", "64", "") == WarmupPlan(seconds=30.0, users=64, rate=None)
    assert parse_warmup("7.5", "", "2.5") == WarmupPlan(seconds=7.5, users=None, rate=2.5)
    for args, message in ((("", "8", ""), "--warmup-users needs --warmup-seconds S"),
                          (("", "", "3"), "--warmup-rate needs --warmup-seconds S"),
                          (("30", "", ""), "--warmup-seconds '30': give --warmup-users N"),
                          (("-1", "4", ""), "--warmup-seconds '-1': expected seconds > 0"),
                          (("nan", "4", ""), "--warmup-seconds 'nan': expected"),
                          (("10", "2.5", ""), "--warmup-users '2.5': expected a whole number of users >= 1"),
                          (("10", "0", ""), "--warmup-users '0'"),
                          (("10", "", "fast"), "--warmup-rate 'fast': expected requests/s > 0")):
        with pytest.raises(ValueError) as e:
            parse_warmup(*args)
        assert str(e.value).startswith(message), str(e.value)


def test_warmup_stage_and_a_plain_run_after_it():
    plan = WarmupPlan(seconds=30.0, users=64)
    assert plan.stage(0.0, senders=8, spawn_rate=100.0) == (64, 100.0)
    assert plan.stage(29.9, senders=8, spawn_rate=100.0) == (64, 100.0)
    assert plan.stage(30.0, senders=8, spawn_rate=100.0) is None
    assert WarmupPlan(seconds=5.0, rate=2.0).stage(1.0, senders=8, spawn_rate=50.0) == (8, 50.0)  # the senders
    assert after_warmup(0.0, 16, 4.0, run_time=60.0) == (16, 4.0)
    assert after_warmup(59.9, 16, 4.0, run_time=60.0) == (16, 4.0)
    assert after_warmup(60.0, 16, 4.0, run_time=60.0) is None  # -t counts from the warm-up's end
    assert after_warmup(1e6, 16, 4.0, run_time=None) == (16, 4.0)  # no -t: until stopped


def row(start, ttft=100.0, users=4, status="ok", e2e=1000.0):
    rec = RequestRecord(meta=RequestMeta(f"r{start}", start, "chat", users=users), status=status, ttft_ms=ttft,
                        tpot_ms=5.0, e2e_ms=e2e, itl_max_ms=9.0, prompt_tokens=100, completion_tokens=10)
    return rec.row()


def test_rows_started_before_the_warmups_end_are_marked():
    marks = WarmupRows()
    plain = [row(1000.0)]
    assert marks.stamp(plain) is plain and marks.summary() == ""  # no warm-up: rows pass untouched
    marks.begin(30.0)
    assert marks.stamp([row(1000.0)])[0][COL.phase] == WARMUP_PHASE  # while it runs, every row is one
    marks.end(1030.0)
    late = marks.stamp([row(1029.9), row(1030.0), row(1031.0)])  # rows arrive after the end, by start time
    assert [r[COL.phase] for r in late] == [WARMUP_PHASE, None, None]
    assert [r[:COL.phase] for r in late] == [row(t)[:COL.phase] for t in (1029.9, 1030.0, 1031.0)]
    assert marks.marked == 2 and marks.summary().startswith("warm-up: 2 request(s) started in the 30-s warm-up")
    marks.end(1040.0)  # a second end never moves it later
    assert marks.until == 1030.0
    marks.begin(30.0)  # a new test: a new warm-up
    assert marks.until == math.inf and marks.marked == 0


class Control:
    """A ShapeControl that records what the warm-up told it."""

    def __init__(self):
        self.calls = []

    def shape_settings(self):
        return {}

    def slos(self):
        return []

    def set_arrival_rate(self, rate):
        self.calls.append(("rate", rate))

    def warmup_began(self, seconds):
        self.calls.append(("began", seconds))

    def warmup_ended(self, at):
        self.calls.append(("ended", at))


class Steps(StepLoadShape):
    steps = (4, 8, 16)
    step_seconds = 10
    spawn_rate = 50.0


def wrapped(monkeypatch, inner, plan, **opts):
    """``WarmupShape(inner, plan)`` on a fake runner, with one clock for Locust's shapes and the wrapper."""
    clock = {"t": 100.0}
    fake_time = types.SimpleNamespace(perf_counter=lambda: clock["t"], time=lambda: 5000.0 + clock["t"])
    monkeypatch.setattr("locust.shape.time", fake_time)
    monkeypatch.setattr("llmload.shapes.warmup_shape.time", fake_time)
    control = Control()
    env = types.SimpleNamespace(parsed_options=types.SimpleNamespace(**opts), llmload_shapes=control, stop_timeout=5)
    shape = WarmupShape(inner, plan)
    shape.runner = types.SimpleNamespace(environment=env, user_count=0)
    shape.reset_time()
    return shape, clock, control


def test_the_wrapper_warms_up_then_runs_every_step_of_the_shape_in_full(monkeypatch):
    inner = Steps()
    shape, clock, control = wrapped(monkeypatch, inner, WarmupPlan(seconds=30.0, users=32))
    assert inner.runner is shape.runner  # the shape after the warm-up reads the same run
    ticks = {}
    for t, users in ((0.0, 0), (10.0, 32), (29.0, 32), (30.0, 32), (31.0, 20), (32.0, 4), (41.9, 4), (42.0, 4),
                     (51.9, 8), (52.0, 8), (61.9, 16), (62.0, 16)):
        clock["t"], shape.runner.user_count = 100.0 + t, users
        ticks[t] = shape.tick()
        if t == 31.0:
            assert control.calls == [("began", 30.0)]  # the warm-up's extra users are still stopping
    assert ticks[0.0] == ticks[10.0] == ticks[29.0] == (32, 50.0)  # the warm-up, at the shape's spawn rate
    assert ticks[30.0] == ticks[31.0] == (4, 50.0)  # the first step, while 28 users finish their requests
    # the warm-up ends once they have (t = 32): the steps' clock starts then, and each step runs its 10 s
    assert ticks[32.0] == ticks[41.9] == (4, 50.0)
    assert ticks[42.0] == ticks[51.9] == (8, 50.0)
    assert ticks[52.0] == ticks[61.9] == (16, 50.0)
    assert ticks[62.0] is None
    assert control.calls == [("began", 30.0), ("ended", 5132.0)]
    assert shape.describe() == inner.describe()
    clock["t"] = 500.0
    shape.reset_time()  # a new test (the web UI's start after a stop): the warm-up again
    assert shape.tick() == (32, 50.0) and control.calls[-1] == ("began", 30.0)
    clock["t"] += 30.0
    shape.runner.user_count = 32  # users that never stop: the shape starts after --stop-timeout + 5 s anyway
    assert shape.tick() == (4, 50.0) and control.calls[-1] == ("began", 30.0)
    clock["t"] += 9.9
    assert shape.tick() == (4, 50.0) and control.calls[-1] == ("began", 30.0)
    clock["t"] += 0.1
    assert shape.tick() == (4, 50.0) and control.calls[-1] == ("ended", 5000.0 + clock["t"])


def test_a_rate_warmup_sets_the_rate_then_gives_it_back_and_a_plain_run_follows(monkeypatch):
    shape, clock, control = wrapped(monkeypatch, None, WarmupPlan(seconds=5.0, rate=3.0), num_users=6,
                                    spawn_rate=2.0, run_time=20)
    assert shape.use_common_options  # a plain run: the web UI keeps its user count and spawn rate
    assert shape.tick() == (6, 100.0)  # senders: -u; the warm-up spawns at 100 users/s
    clock["t"] += 5.0
    assert shape.tick() == (6, 2.0)  # the plain run: -u at -r (as many users: nothing to wait for)
    assert control.calls == [("began", 5.0), ("rate", 3.0), ("rate", None), ("ended", 5105.0)]
    clock["t"] += 19.9
    assert shape.tick() == (6, 2.0)
    clock["t"] += 0.1
    assert shape.tick() is None  # -t 20 counted from the warm-up's end


def test_the_live_window_shows_warmup_rows_but_never_judges_them():
    live = LiveWindow(window_s=20)
    for i in range(20):
        live.add_row(row(1000 + i * 0.1, ttft=5000.0))
    warm = [(*r[:COL.phase], WARMUP_PHASE, *r[COL.phase + 1:]) for r in [row(1001 + i * 0.1, ttft=9000.0)
                                                                       for i in range(20)]]
    for r in warm:
        live.add_row(r)
    shown, _ = live.merged(1013.0, 0.0)
    judged, _ = live.merged(1013.0, 0.0, warmup=False)
    assert shown["chat"].requests == 40 and judged["chat"].requests == 20
    assert judged["chat"].hist["ttft"].percentile(99) < 6000.0


def test_a_search_step_never_counts_a_warmup_row():
    step = StepSample(4.0, "users", started_at=1000.0, warmup_s=0.0, slos=[SLO("ttft_p95_ms", 200.0)], floor=1)
    hot = row(1001.0, ttft=9000.0)
    step.add([(*hot[:COL.phase], WARMUP_PHASE, *hot[COL.phase + 1:]), row(1002.0, ttft=100.0)])
    assert len(step.rows) == 1 and step.verdict(1100.0, 0.0) == (True, [])


def test_the_report_leaves_the_warmup_out_of_steps_and_capacity(tmp_path):
    """A 32-user warm-up with a TTFT far over the SLO, then 4 and 8 users that meet it: with the
    warm-up left out, the steps and the capacity are those of the run without it."""
    steps = [req(1030 + i * 0.5, 4) for i in range(40)] + [req(1050 + i * 0.25, 8) for i in range(80)]
    warm = [{**req(1000 + i * 0.125, 32, ttft=5000.0), "phase": WARMUP_PHASE} for i in range(240)]
    slos = [parse_slo("ttft_p95_ms=200")]
    with_warmup = build_report(write_csv(tmp_path / "warm_requests.csv", warm + steps), ReportOptions(slos=slos))
    without = build_report(write_csv(tmp_path / "cold_requests.csv", steps), ReportOptions(slos=slos))
    assert [s.data["users"] for s in with_warmup.overall.steps] == [4, 8]
    assert [s.data for s in with_warmup.overall.steps] == [s.data for s in without.overall.steps]
    assert with_warmup.overall.capacity == without.overall.capacity and without.overall.capacity["users"] == 8
    assert "240 request(s) of the run's warm-up" in " ".join(with_warmup.notes)
    unmarked = build_report(write_csv(tmp_path / "unmarked_requests.csv", [{**r, "phase": None} for r in warm]
                                      + steps), ReportOptions(slos=slos))
    assert unmarked.overall.capacity != without.overall.capacity  # the test can fail: the same rows, unmarked


def test_the_summary_names_the_warmup_requests_left_out():
    marks = WarmupRows()
    marks.begin(20.0)
    marks.stamp([row(1000.0), row(1001.0)])
    stats = LLMStats()
    stats.add(RequestRecord(meta=RequestMeta("r", 1000.0, "chat"), status="ok", ttft_ms=100.0, e2e_ms=900.0))
    text = end_of_run_text(stats.rows(), {}, LiveHistory(), "", 2.0, [], None, warmup=marks.summary())
    assert "warm-up: 2 request(s) started in the 20-s warm-up (phase=warmup" in text
