"""`llmload calibrate`'s pure parts: the climb (bracket, bisect, confirm), the tolerances and a
step judged against them, the curve, the result, the page, and the live verdict's curve lookup."""

from __future__ import annotations

import re
import socket

import pytest

from llmload.calibrate.climb import Climb
from llmload.calibrate.command import build_result, summary_lines
from llmload.calibrate.curve import curve
from llmload.calibrate.page import MIN_TICK_PX, _chart, render_page
from llmload.calibrate.step import CalibrateSettings
from llmload.calibrate.tolerance import Tolerances, accuracy, combine, judge
from llmload.health.calibration import from_dict, save_calibration
from llmload.health.verdict import verdict

PLAN = [32, 64, 128, 256, 512, 1024, 2048, 4096]


def climb_against(knee: int, plan=PLAN, fails=()) -> tuple[Climb, list[tuple[int, str]]]:
    """Run a climb against an oracle: a level passes when it is at most ``knee`` (and its n-th
    measurement is not in ``fails``)."""
    c, seen = Climb(plan), []
    for _ in range(100):
        n = c.next_level()
        if n is None:
            return c, seen
        seen.append((n, c.next_kind))
        c.record(n <= knee and len(seen) - 1 not in fails)
    raise AssertionError("the climb did not end")


def test_the_climb_brackets_bisects_to_an_eighth_and_confirms():
    c, seen = climb_against(300)
    # bracket 32..512 (512 fails), bisect [256, 512] to 32: 384 ✗, 320 ✗, 288 ✓ → [288, 320]; confirm 288
    assert seen == [(32, "bracket"), (64, "bracket"), (128, "bracket"), (256, "bracket"), (512, "bracket"),
                    (384, "probe"), (320, "probe"), (288, "probe"), (288, "confirm")]
    assert (c.limit, c.limit_found, c.limited_by, c.confirmed) == (288, True, "client", True)
    for knee in (40, 100, 700, 1000, 3000):
        c, seen = climb_against(knee)
        assert c.limit <= knee and knee - c.limit <= max(1, round(c.limit / 8)) + 1 and c.confirmed, (knee, seen)
        assert len(seen) <= PLAN.index(min(p for p in PLAN if p > knee)) + 1 + 3 + 1  # bracket, 3 probes, confirm


def test_the_climb_without_a_failure_is_a_lower_bound_and_confirmed():
    c, seen = climb_against(10_000)
    assert seen[-1] == (4096, "confirm") and c.limit == 4096 and not c.limit_found and c.confirmed


def test_the_climb_below_the_lowest_step_bisects_down():
    c, seen = climb_against(5)
    assert seen[0] == (32, "bracket") and seen[-1] == (5, "confirm") and c.limit == 5
    c, seen = climb_against(0)
    assert c.limit == 0 and c.confirmed is None and seen[-1] == (1, "end")


def test_a_failed_confirmation_falls_back_to_the_next_level_that_passed():
    # knee 300: the confirmation of 288 (the 9th measurement) fails: 256 is confirmed instead
    c, seen = climb_against(300, fails={8})
    assert seen[-2:] == [(288, "confirm"), (256, "confirm")] and c.limit == 256 and c.confirmed
    c = Climb([8, 16])
    for ok, cause in ((True, "client"), (True, "client"), (False, "machine")):  # the confirmation: the machine's
        c.next_level()
        c.record(ok, cause)
    assert c.next_level() is None and c.limit == 16 and c.confirmed is False


def test_the_mock_or_the_machine_ends_the_bracket_with_a_lower_bound():
    c = Climb([8, 16, 32])
    for ok, cause in ((True, "client"), (False, "mock")):
        c.next_level()
        c.record(ok, cause)
    assert c.next_level() == 8 and c.next_kind == "confirm"
    c.record(True)
    assert c.next_level() is None and (c.limit, c.limit_found, c.limited_by) == (8, False, "mock")
    with pytest.raises(ValueError, match="--streams"):
        Climb([0])


def test_tolerances_check_their_flags():
    assert Tolerances().describe() == "TTFT error <= 1 ms and itl_max error <= 2 ms for 99 % of requests"
    assert Tolerances(max_stall_ms=3).describe().endswith("no stall over 3 ms of CPU")
    with pytest.raises(ValueError, match="--share 1.5"):
        Tolerances(share=1.5)
    with pytest.raises(ValueError, match="--ttft-error-ms 0"):
        Tolerances(ttft_error_ms=0)


def test_accuracy_judges_each_request_on_both_errors():
    tol = Tolerances(ttft_error_ms=1.0, itl_max_error_ms=2.0)
    pairs = [(0.1, 0.0)] * 96 + [(-1.5, 0.0), (0.2, 3.0), (0.2, -2.5), (0.3, None)]
    a = accuracy(pairs, tol)
    assert a["requests"] == 100 and a["share"] == 0.97 and a["ttft_share"] == 0.99
    assert a["itl_max_share"] == round(97 / 99, 5) and a["ttft_err_p50_ms"] == 0.1
    assert accuracy([], tol)["share"] is None


def repeat(streams: int, **kw) -> dict:
    base = {"streams": streams, "users": streams, "processes": 1, "tps": 50.0 * streams,
            "tps_per_process": 50.0 * streams, "expected_tps": 50.0 * streams, "mock_cpu_pct": 30.0,
            "requests": 100, "ttft_err_p99_ms": 0.01, "itl_max_err_p99_ms": 0.01, "ttft_share": 1.0,
            "itl_max_share": 1.0, "share": 1.0, "stall_cpu_max_ms": 0.5, "lag_p99_ms": 1.0,
            "coalesced_share": 0.0, "cpu_pct": 40.0}
    return {**base, **kw}


def step(streams: int, runs=None, **kw) -> dict:
    runs = runs or [repeat(streams, **kw)] * 3
    s = {**combine(runs), "runs": runs}
    s["ok"], s["why"] = judge(s, Tolerances())
    return s


def test_a_step_is_the_median_of_its_repeats_with_the_spread():
    runs = [repeat(64, share=0.95, lag_p99_ms=9.0), repeat(64, share=0.995), repeat(64, share=1.0)]
    s = combine(runs)
    assert s["share"] == 0.995 and s["spread"]["share"] == [0.95, 1.0] and s["repeats"] == 3
    assert s["lag_p99_ms"] == 1.0 and s["spread"]["lag_p99_ms"] == [1.0, 9.0]
    with pytest.raises(ValueError):
        combine([])


def test_a_step_fails_on_the_share_and_on_stalls_only_when_asked():
    tol = Tolerances()
    assert judge(repeat(64), tol) == (True, "")
    ok, why = judge(repeat(64, share=0.97, ttft_share=0.97, ttft_err_p99_ms=1.4), tol)
    assert not ok and why == "97.0 % of requests in tolerance < 99 % (TTFT error p99 1.40 ms)"
    assert judge(repeat(64, stall_cpu_max_ms=9.0), tol) == (True, "")  # a stall that bent nothing
    ok, why = judge(repeat(64, stall_cpu_max_ms=9.0), Tolerances(max_stall_ms=5.0))
    assert not ok and why == "an event-loop stall used 9.0 ms of CPU > --max-stall-ms 5"
    assert judge(repeat(64, tps=100.0, mock_cpu_pct=97.0), tol)[1].startswith("mock-limited")
    busy = judge(repeat(64, share=0.5, others_cpu_pct=60.0), tol)[1]
    assert busy.startswith("machine busy: other processes used 60 % of a core")
    assert judge(repeat(64, requests=0), tol)[1] == "no request finished in the steady state"
    assert judge(repeat(64, stall_cpu_max_ms=None), tol)[1].startswith("no client health report")


def test_the_curve_has_one_point_per_level_and_a_confirmed_level_twice_measured():
    steps = [step(64, lag_p99_ms=1.0), step(128, lag_p99_ms=2.0), step(256, share=0.9, lag_p99_ms=8.0),
             step(128, lag_p99_ms=3.0)]
    points = curve(steps, Tolerances())
    assert [(p["streams"], p["ok"], p["measured"]) for p in points] == [(64, True, 1), (128, True, 2), (256, False, 1)]
    assert points[1]["lag_p99_ms"] == 2.5  # the median over the six repeats of 128


def test_the_result_the_page_and_the_file_the_verdict_reads(tmp_path):
    s = CalibrateSettings(target_tps=100_000.0)
    steps = [step(256), step(512), step(1024, share=0.8, ttft_share=0.8, ttft_err_p99_ms=3.0), step(768),
             step(768)]
    climb = {"limit": 768, "limit_found": True, "limited_by": "client", "confirmed": True, "levels": []}
    r = build_result(s, steps, [0, 1], climb)
    per = r["per_process"]
    assert per == {"max_tps": 38_400.0, "max_streams": 768, "limit_found": True, "limited_by": "client",
                   "confirmed": True, "why": "80.0 % of requests in tolerance < 99 % (TTFT error p99 3.00 ms)"}
    assert r["processes_needed"] == 3 and r["version"] == 2 and r["host"] == socket.gethostname()
    assert r["tolerances"]["share"] == 0.99 and [p["streams"] for p in r["curve"]] == [256, 512, 768, 1024]
    r["summary"] = summary_lines(r)
    text = "\n".join(r["summary"])
    assert "per process: 38,400 tok/s at 768 streams with TTFT error <= 1 ms" in text and "--processes 3" in text
    page = render_page(r)
    assert page.count("<svg") == 4 and "limit 768" in page and "tolerance 1 ms" in page and "--share 99 %" in page
    path = str(tmp_path / "cal.json")
    save_calibration(r, path)
    cal = from_dict(r)
    assert cal.version == 2 and cal.max_streams == 768 and len(cal.curve) == 4 and "99 %" in cal.tolerance


def test_the_limit_label_stays_inside_its_chart_when_the_limit_is_the_last_point():
    """A limit at the right edge had its label run past the chart: "lir" (issue 32, item 16)."""
    import re

    from llmload.calibrate.page import RIGHT, W

    s = CalibrateSettings(target_tps=100_000.0)
    climb = {"limit": 1024, "limit_found": False, "limited_by": "mock", "confirmed": True, "levels": []}
    r = build_result(s, [step(256), step(512), step(1024)], [0, 1], climb)
    labels = re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)" class="ll">limit 1024</text>',
                        render_page(r))
    assert len(labels) == 4 and all(a == "end" and float(x) <= W - RIGHT for x, a in labels), labels
    climb["limit"] = 256  # the first point: right of its line, as before
    labels = re.findall(r'text-anchor="(\w+)" class="ll">limit 256<', render_page(build_result(
        s, [step(256), step(512), step(1024)], [0, 1], climb)))
    assert labels == ["start"] * 4


def test_a_log_axis_labels_a_tick_at_or_below_its_lowest_point_and_one_repeat_is_singular():
    """The screenshot showed TTFT errors of 0.015 and 0.025 ms under the last tick, 0.1: no label said
    how small they were. The axis now starts at a whole decade (0.01 here). "1 repeats" read wrong."""
    import re

    s = CalibrateSettings(target_tps=100_000.0, repeats=1)
    climb = {"limit": 8, "limit_found": False, "limited_by": "mock", "confirmed": True, "levels": []}
    r = build_result(s, [step(4, ttft_err_p99_ms=0.025), step(8, ttft_err_p99_ms=0.015)], [0, 1], climb)
    page = render_page(r)
    ttft = page.split("</svg>")[0]
    ticks = [float(t) for t in re.findall(r'text-anchor="end">([\d.]+)</text>', ttft)]
    assert min(ticks) == 0.01 and min(ticks) <= 0.015, ticks
    assert "1 repeat per step" in page and "1 repeats" not in page


def v2(**signals) -> dict:
    pts = [{"streams": n, "tps_per_process": 50.0 * n, "ok": n <= 512, "lag_p99_ms": lag, "stall_cpu_max_ms": cpu,
            "coalesced_share": co} for n, lag, cpu, co in ((64, 1.0, 1.0, 0.0), (256, 4.0, 4.0, 0.01),
                                                          (512, 6.0, 8.0, 0.02), (1024, 30.0, 20.0, 0.2))]
    return {"version": 2, "host": "h", "tolerance": Tolerances().describe(), "curve": pts,
            "per_process": {"max_tps": 25_600.0, "max_streams": 512, "limit_found": True}}


def test_the_curve_allows_at_a_load_what_held_up_to_it():
    cal = from_dict(v2())
    assert cal.allowance(32) == {"lag_p90_ms": 5.0, "stall_cpu_max_ms": 5.0, "coalesced_share": 0.02}  # floors
    assert cal.allowance(100) == {"lag_p90_ms": 6.0, "stall_cpu_max_ms": 6.0, "coalesced_share": 0.02}
    assert cal.allowance(5000)["lag_p90_ms"] == 9.0  # past the limit: the limit's (the rate judges it)
    assert cal.signals_over({"streams": 100, "lag_p90_ms": 1.0, "stall_cpu_max_ms": 30.0}) == {}  # one stall
    over = cal.signals_over({"streams": 100, "lag_p90_ms": 20.0, "stall_cpu_max_ms": 30.0})
    assert list(over.values()) == ["event-loop lag p90 20.0 ms > 6.0 ms", "stall CPU 30.0 ms > 6.0 ms"]
    assert cal.signals_over({"streams": 100, "coalesced_share": 0.1}) == {
        "coalesced_share": "coalesced-read share 10.0 % > 2.0 %"}
    assert from_dict({**v2(), "version": 1}).curve == ()  # a version 1 file: the rate alone


def sample(**kw) -> dict:
    base = {"cpu": 40.0, "lag_p90_ms": 1.0, "lag_p99_ms": 2.0, "steal_pct": 0.0, "others_cpu": 5.0, "run_queue": 0.5,
            "cores": 1, "machine_cores": 2, "tps": 5_000.0, "streams": 100, "stall_max_ms": 0.0,
            "stall_cpu_max_ms": 1.0, "coalesced_share": 0.0, "stall_culprit": ""}
    return {**base, **kw}


def test_the_live_verdict_uses_the_curve_and_names_the_tolerance():
    cal = from_dict(v2())
    assert verdict(sample(), cal) == (False, "", "")
    limited, cause, advice = verdict(sample(lag_p90_ms=15.0, stall_cpu_max_ms=30.0), cal)
    assert limited and cause == "calibrated" and "at 100 streams" in advice
    assert "within TTFT error <= 1 ms and itl_max error <= 2 ms for 99 % of requests" in advice
    # a busy machine does not fill loop turns with this process's CPU: the stalls are still the client's
    busy = sample(lag_p90_ms=15.0, stall_cpu_max_ms=30.0, run_queue=5.0)
    assert verdict(busy, cal)[1] == "calibrated"
    assert verdict({**busy, "lag_p90_ms": 25.0, "stall_cpu_max_ms": 1.0}, cal)[1] == "machine"
    limited, cause, advice = verdict(sample(tps=30_000.0), cal)
    assert limited and cause == "calibrated" and "25600 tok/s" in advice
    old = from_dict({**v2(), "version": 1})
    assert not verdict(sample(lag_p90_ms=15.0, stall_cpu_max_ms=30.0), old)[0]  # old behaviour: the rate only


def test_processes_scale_when_each_streams_what_one_alone_does():
    from llmload.calibrate.command import scaling_of

    together = [step(256, tps_per_process=9_000.0)]
    sc = scaling_of(together, step(256, tps_per_process=10_000.0), 256, 2)
    assert sc["share"] == 0.9 and sc["scales"] and sc["tps_one_process"] == 10_000.0
    assert not scaling_of(together, step(256, tps_per_process=12_000.0), 256, 2)["scales"]
    climb = {"limit": 256, "limit_found": True, "limited_by": "client", "confirmed": True, "levels": []}
    r = build_result(CalibrateSettings(processes=2), together, [0, 1], climb, sc)
    assert "--processes 2: 9,000 tok/s per process together at 256 streams each, 90 % of one process alone " \
           "(10,000 tok/s): they scale" in summary_lines(r)


def test_the_command_line_takes_the_tolerances(capsys):
    from llmload.cli import build_parser

    args = build_parser().parse_args(["calibrate", "--ttft-error-ms", "0.5", "--share", "0.95", "--repeats", "5"])
    assert (args.ttft_error_ms, args.itl_max_error_ms, args.share, args.max_stall_ms, args.repeats) == (
        0.5, 2.0, 0.95, None, 5)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["calibrate", "--share", "1.5"])
    assert "--share: expected a share of requests" in capsys.readouterr().err


def test_a_calibration_of_several_processes_binds_a_master_port_of_its_own():
    from llmload.calibrate.locust_run import locust_command

    one = locust_command("lf.py", "http://127.0.0.1:1", 8, 5, 1, "/tmp/p")
    assert "--processes" not in one and "--master-bind-port" not in one
    cmd = locust_command("lf.py", "http://127.0.0.1:1", 8, 5, 2, "/tmp/p")
    port = cmd[cmd.index("--master-bind-port") + 1]
    assert cmd[cmd.index("--processes") + 1] == "2" and cmd[cmd.index("--master-port") + 1] == port != "5557"


def test_the_share_charts_tick_labels_never_crowd_a_wide_range():
    """A --share of 50 % spans 50 points: 99 and 100 were 3.9 px apart, labels over each other."""

    points = [{"streams": 4, "ttft_share": 1.0, "ok": True, "tps": 300.0},
              {"streams": 8, "ttft_share": 0.97, "ok": True, "tps": 600.0}]
    for share in (50.0, 90.0, 99.0):
        svg = _chart("x", points, "ttft_share", False, share, f"--share {share:g} %", 8, "%", scale=100)
        ticks = [(float(y), float(v)) for y, v in re.findall(r'y="([0-9.]+)" text-anchor="end">([0-9.]+)</text>', svg)]
        assert ticks[0][1] == 100 and len(ticks) >= 3, ticks
        assert all(b[0] - a[0] >= MIN_TICK_PX for a, b in zip(ticks, ticks[1:], strict=False)), ticks
