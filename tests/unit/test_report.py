"""The report on hand-made CSVs whose right answers are worked out by hand in each test."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from llmload.metrics.slo import slos_for
from llmload.report import ReportError, ReportOptions, build_report, parse_slo, write_report
from llmload.report.capacity import cost_at, find_capacity, plan_for
from tests.support.report_rows import req, write_csv


def two_step_run(tmp_path, second_ttft=300.0):
    """Step A: 4 users, t=1000..1020, one request every 0.5 s (ttft 100, tpot 10, e2e 1 s).
    Step B: 8 users, t=1020..1040, one request every 0.25 s (ttft `second_ttft`, tpot 20, e2e 2 s)."""
    rows = [req(1000 + i * 0.5, 4) for i in range(40)]
    rows += [req(1020 + i * 0.25, 8, ttft=second_ttft, tpot=20.0, e2e=2000.0) for i in range(80)]
    return write_csv(tmp_path / "run_requests.csv", rows)


def test_steps_warmup_throughput_and_percentiles(tmp_path):
    prefix = two_step_run(tmp_path)
    rep = build_report(prefix, ReportOptions(warmup_s=5.0))
    a, b = (s.data for s in rep.overall.steps)
    # Step A: measured over [1005, 1020) = 15 s. Starts in window: 1005.0 .. 1019.5 → 30 requests.
    assert a["users"] == 4 and a["duration_s"] == 15.0 and a["requests"] == 30
    # Edge-corrected: 2 requests in flight at every moment, each 1 s long, so 2 req/s of lifetime
    # falls in the window: starts 1005.0 .. 1019.0 wholly inside (29), 1004.5 and 1019.5 half → 30 / 15 s.
    assert a["rps"] == 2.0
    assert a["output_tps"] == 2.0 * 91 and a["total_tps"] == 2.0 * 191
    assert a["ttft_ms"]["p50"] == 100.0 and a["tpot_ms"]["p99"] == 10.0
    # Step B (last): window [1025, 1039.75), 14.75 s; 59 starts in it; 8 requests of 2 s in flight
    # throughout → 4 req/s of lifetime in the window → 4.0 req/s.
    assert b["users"] == 8 and b["duration_s"] == 14.75 and b["requests"] == 59
    assert b["rps"] == pytest.approx(4.0)
    # The default error budget is an SLO: no step failed, so the highest step is the capacity.
    assert rep.overall.capacity["limited_by"].startswith("highest step tested")
    assert rep.overall.capacity["users"] == 8
    off = build_report(prefix, ReportOptions(warmup_s=5.0, error_budget=None))
    assert off.overall.capacity["limited_by"].startswith("no SLO given")


def test_slo_verdicts_capacity_and_interpolation(tmp_path):
    prefix = two_step_run(tmp_path)
    slos = [parse_slo("ttft_p95_ms=200"), parse_slo("error_rate=0.01")]
    rep = build_report(prefix, ReportOptions(slos=slos))
    a, b = (s.data for s in rep.overall.steps)
    assert a["slo_met"] is True and b["slo_met"] is False
    # 59 samples, all 300 ms: the interval's low end is 300 (> 200, not borderline); 59 cannot
    # bound a p95 from above (that takes ~72), so its high end is open.
    assert b["slo"]["ttft_p95_ms"] == {"value": 300.0, "limit": 200.0, "met": False, "n": 59,
                                       "ci95": [300.0, None], "borderline": False}
    assert b["goodput_rps"] == 0.0 and a["goodput_rps"] == 2.0
    cap = rep.overall.capacity
    assert cap["users"] == 4 and cap["rps"] == 2.0 and cap["limited_by"] == "ttft_p95_ms"
    # ttft p95 goes 100 → 300 between the steps; 200 is half way: rps 2 + 0.5 × (4 − 2) = 3
    assert cap["interpolated_rps"] == pytest.approx(3.0)


def test_cost_and_plan_by_hand():
    cap = {"users": 4, "rps": 2.0, "goodput_rps": 1.0, "output_tps": 200.0, "total_tps": 1000.0}
    c = cost_at(cap, gpu_hourly_usd=4.5, gpus_per_replica=2, input_tps=800.0, output_cost_weight=3.0)
    assert c["usd_per_hour"] == 9.0
    assert c["usd_per_request"] == pytest.approx(9.0 / 7200)  # 2 req/s = 7200 req/h
    assert c["usd_per_good_request"] == pytest.approx(9.0 / 3600)
    assert c["usd_per_million_output_tokens"] == pytest.approx(9.0 / 720_000 * 1e6)  # 12.5
    assert c["usd_per_million_total_tokens"] == pytest.approx(2.5)
    # 800 input + 3 × 200 output = 1400 token units/s → 5.04M units/h → $9 / 5.04M × 1M
    assert c["usd_per_million_input_tokens"] == pytest.approx(9.0 / 5.04, rel=1e-6)
    assert c["usd_per_million_output_tokens_weighted"] == pytest.approx(3 * 9.0 / 5.04, rel=1e-6)
    p = plan_for(2.0, target_rps=40.0, headroom=0.3, gpus_per_replica=2, gpu_hourly_usd=4.5)
    # each replica at 70 % of 2 req/s = 1.4 req/s → ⌈40 / 1.4⌉ = ⌈28.57⌉ = 29 replicas, 58 GPUs
    assert p["replicas"] == 29 and p["gpus"] == 58
    assert p["usd_per_month"] == pytest.approx(58 * 4.5 * 730)
    assert plan_for(2.0, 1.4, 0.3, 1, None)["replicas"] == 1  # exactly at the limit: no extra replica
    assert plan_for(None, 10, 0.3, 1, 1.0)["replicas"] is None
    with pytest.raises(ValueError, match="headroom"):
        plan_for(2.0, 10, 1.0, 1, 1.0)


def test_daily_requests_plan_and_report_files(tmp_path):
    prefix = two_step_run(tmp_path)
    opts = ReportOptions(slos=[parse_slo("ttft_p95_ms=200")], gpu_hourly_usd=2.0, daily_requests=864_000,
                         peak_factor=3.0, headroom=0.5)
    rep = build_report(prefix, opts)
    plan = rep.overall.plan
    # 864,000 / 86,400 = 10 req/s average × 3 = 30 req/s peak; 2 req/s × 50 % = 1 req/s per replica
    assert plan["target_rps"] == 30.0 and plan["replicas"] == 30 and plan["usd_per_month"] == 30 * 2.0 * 730
    out = tmp_path / "out"
    paths = write_report(rep, str(out))
    data = json.loads((out / "report.json").read_text())
    assert set(data) >= {"steps", "capacity", "cost", "plan"}
    step = data["steps"][0]
    for key in ("users", "start_time", "duration_s", "requests", "errors", "rps", "output_tps", "total_tps",
                "ttft_ms", "tpot_ms", "e2e_ms", "itl_max_ms", "goodput_rps", "slo_met"):
        assert key in step, key
    assert set(step["ttft_ms"]) >= {"p50", "p90", "p95", "p99"}
    assert set(data["capacity"]) >= {"users", "rps", "output_tps", "limited_by"}
    assert set(data["cost"]) >= {"usd_per_hour", "usd_per_request", "usd_per_good_request",
                                 "usd_per_million_output_tokens", "usd_per_million_total_tokens"}
    assert set(data["plan"]) >= {"target_rps", "headroom", "replicas", "gpus", "usd_per_month"}
    html = (out / "report.html").read_text()
    # the charts are inline SVG and nothing is fetched: it opens offline (xmlns URIs name, never load)
    assert html.count('class="chart"') >= 4
    assert not re.search(r"""(src|href)=["']?(https?:)?//|url\((https?:)?//|@import""", html)
    md = (out / "report.md").read_text()
    assert "| 4 |" in md and "limited by | ttft_p95_ms" in md
    vllm = json.loads((out / "vllm_bench_serve.json").read_text())
    assert vllm[0]["request_throughput"] == 2.0 and vllm[0]["median_ttft_ms"] == 100.0
    assert vllm[0]["completed"] == 30 and "p99_tpot_ms" in vllm[0] and "mean_e2el_ms" in vllm[0]
    assert len(paths) == 4


def test_per_scenario_slos_and_prefix_cache(tmp_path):
    rows = []
    for i in range(60):
        t = 1000 + i * 0.5
        rows.append(req(t, 4, ttft=100.0, scenario="chat"))
        hit = i % 2 == 0
        rows.append(req(t + 0.1, 4, ttft=50.0 if hit else 400.0, scenario="rag", cached=64 if hit else 0,
                        prompt=128))
    prefix = write_csv(tmp_path / "mix_requests.csv", rows)
    slos = [parse_slo("ttft_p95_ms=200"), parse_slo("rag:ttft_p95_ms=500")]
    assert [s.text() for s in slos_for(slos, "rag")] == ["rag:ttft_p95_ms=500"]
    assert [s.text() for s in slos_for(slos, "chat")] == ["ttft_p95_ms=200"]
    rep = build_report(prefix, ReportOptions(slos=slos))
    assert rep.scenarios["chat"].steps[0].data["slo_met"] is True
    assert rep.scenarios["rag"].steps[0].data["slo_met"] is True  # 400 ≤ 500 for rag
    assert rep.overall.steps[0].data["slo_met"] is False  # the whole run mixes in rag's 400 ms
    pc = rep.scenarios["rag"].prefix_cache
    assert pc["hit_ratio_tokens"] == pytest.approx(0.25)  # 64 of 128 on every other request
    assert pc["ttft_ms_hit"]["p50"] == 50.0 and pc["ttft_ms_miss"]["p50"] == 400.0
    assert rep.scenarios["chat"].prefix_cache is None


def test_failed_requests_stay_out_of_latency_and_count_as_errors(tmp_path):
    rows = [req(1000 + i * 0.5, 4) for i in range(40)]
    rows += [req(1006 + i, 4, status="timeout", ttft=None, e2e=60000.0) for i in range(3)]
    rows += [req(1007.2, 4, status="cancelled", ttft=9999.0)]
    prefix = write_csv(tmp_path / "e_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("error_rate=0.05")]))
    s = rep.overall.steps[0].data
    assert s["errors"] == 3 and s["errors_by_status"] == {"timeout": 3}
    # last step: window [1005, 1019.5) (its end is its last start): ok starts 1005.0 .. 1019.0 = 29,
    # plus 3 timeouts; the cancelled one counts nowhere
    assert s["requests"] == 32 and s["ttft_ms"]["p99"] == 100.0
    assert s["slo"]["error_rate"]["value"] == pytest.approx(3 / 32, abs=1e-4)
    assert s["slo_met"] is False


def test_no_step_meets_the_slo(tmp_path):
    prefix = two_step_run(tmp_path)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p50_ms=50")], gpu_hourly_usd=1.0,
                                             target_rps=10))
    cap = rep.overall.capacity
    assert cap["users"] is None and "lowest step" in cap["limited_by"]
    assert rep.overall.cost is None and rep.overall.plan["replicas"] is None


def test_bad_and_partial_input_give_clear_errors_or_warnings(tmp_path):
    with pytest.raises(ReportError, match="no such file"):
        build_report(str(tmp_path / "nope"))
    (tmp_path / "empty_requests.csv").write_text("")
    with pytest.raises(ReportError, match="empty"):
        build_report(str(tmp_path / "empty"))
    (tmp_path / "cols_requests.csv").write_text("request_id,status\nx,ok\n")
    with pytest.raises(ReportError, match="missing column.*start_time.*users"):
        build_report(str(tmp_path / "cols"))
    prefix = two_step_run(tmp_path)
    path = tmp_path / "run_requests.csv"
    text = path.read_text()
    path.write_text(text + "rX,1040.5,chat,ok,200,12")  # killed mid-write
    rep = build_report(prefix)
    assert any("cut off" in w for w in rep.warnings) and len(rep.df) == 120
    path.write_text(text + "junk,notatime,chat,bogus,,,,,,,,,,,,,,,,,\n")
    rep = build_report(prefix)
    assert any("skipped" in w for w in rep.warnings)
    with pytest.raises(ReportError, match="warmup"):
        build_report(prefix, ReportOptions(warmup_s=-1))
    with pytest.raises(ReportError, match="either --target-rps or --daily-requests"):
        build_report(prefix, ReportOptions(target_rps=1, daily_requests=5))
    rep = build_report(prefix, ReportOptions(warmup_s=100))
    assert rep.overall.steps == [] and any("warm-up" in w for w in rep.warnings)
    write_report(rep, str(tmp_path / "empty_out"))  # still writes a report of what is there


def test_open_loop_runs_step_by_arrival_rate(tmp_path):
    rows = []
    for i in range(40):  # 2 req/s for 20 s, ttft 100
        r = req(1000 + i * 0.5, 16)
        r["arrival_rate"] = 2.0
        rows.append(r)
    for i in range(80):  # then 4 req/s for 20 s, ttft 900; the same 16 senders
        r = req(1020 + i * 0.25, 16, ttft=900.0)
        r["arrival_rate"] = 4.0
        rows.append(r)
    prefix = write_csv(tmp_path / "ol_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=500")]))
    data = rep.to_json()
    assert data["steps_by"] == "arrival_rate"
    assert [(s["level"], s["arrival_rate"], s["users"]) for s in data["steps"]] == [(2.0, 2.0, 16), (4.0, 4.0, 16)]
    assert data["steps"][0]["rps"] == 2.0
    cap = data["capacity"]
    assert cap["arrival_rate"] == 2.0 and cap["limited_by"] == "ttft_p95_ms" and cap["next_step_level"] == 4.0
    out = tmp_path / "ol"
    write_report(rep, str(out))
    assert "| arrival rate (req/s) | users |" in (out / "report.md").read_text()
    assert json.loads((out / "vllm_bench_serve.json").read_text())[1]["request_rate"] == 4.0


def test_slo_parsing():
    s = parse_slo("rag:tpot_p99.9_ms=50")
    assert (s.scenario, s.metric, s.limit, s.column, s.stat) == ("rag", "tpot_p99.9_ms", 50.0, "tpot_ms", "p99.9")
    assert parse_slo("e2e_mean_ms=3000").stat == "mean"
    assert parse_slo("itl_max_p95_ms=500").column == "itl_max_ms"
    for bad, msg in (("ttft=1", "unknown metric"), ("ttft_p95_ms", "METRIC=VALUE"), ("ttft_p95_ms=-1", ">= 0"),
                     ("error_rate=2", "fraction"), ("ttft_p0_ms=1", "percentile")):
        with pytest.raises(ValueError, match=msg):
            parse_slo(bad)


def test_capacity_edge_cases():
    assert find_capacity([], True)["users"] is None
    step = {"users": 4, "start_time": 0, "rps": 1.0, "output_tps": 1, "total_tps": 2, "goodput_rps": 1,
            "slo_met": True, "slo": {"ttft_p95_ms": {"value": 1, "limit": 2, "met": True}}}
    assert find_capacity([step], True)["limited_by"].startswith("highest step tested")
    assert math.isclose(find_capacity([step], True)["rps"], 1.0)


def test_rows_with_more_fields_than_the_header_are_counted_not_dropped_silently(tmp_path):
    prefix = two_step_run(tmp_path)
    path = Path(f"{prefix}_requests.csv")
    lines = path.read_text().splitlines(keepends=True)
    lines[5] = lines[5].rstrip("\n") + ",extra,cells\n"
    lines[9] = lines[9].rstrip("\n") + ",x\n"
    path.write_text("".join(lines))
    rep = build_report(prefix, ReportOptions(warmup_s=5.0))
    (w,) = [w for w in rep.warnings if "more fields than the header" in w]
    assert "2 line(s)" in w and "first: line 6" in w
    assert len(rep.df) == 118


def test_no_capacity_names_the_thin_step_below_the_broken_one_not_a_wrong_lowest_step(tmp_path):
    """Issue 32, item 5: steps [2, 8], the 2-user step thin: it said "broken already at the lowest step, 8 users"."""
    rows = [req(1000 + i * 0.5, 2, tpot=5.0) for i in range(12)]  # 6 s of the 2-user step, 12 requests
    rows += [req(1010 + i * 0.1, 8, tpot=20.0) for i in range(100)]  # the 8-user step breaks tpot_p95_ms=10
    prefix = write_csv(tmp_path / "x_requests.csv", rows)
    cap = build_report(prefix, ReportOptions(slos=[parse_slo("tpot_p95_ms=10")], warmup_s=1)).overall.capacity
    assert cap["users"] is None
    assert cap["limited_by"] == ("tpot_p95_ms (broken at the 8-user step; below it too few requests for a verdict: "
                                 "the 2-user step had 10 ok requests, 30 needed: rerun with longer steps)")
    floor = build_report(prefix, ReportOptions(slos=[parse_slo("tpot_p95_ms=10")], warmup_s=1, sample_floor=5))
    assert floor.overall.capacity["users"] == 2  # with a floor it meets, the 2-user step is the capacity
    alone = [req(1010 + i * 0.1, 8, tpot=20.0) for i in range(100)]
    cap = build_report(write_csv(tmp_path / "y_requests.csv", alone),
                       ReportOptions(slos=[parse_slo("tpot_p95_ms=10")], warmup_s=1)).overall.capacity
    assert cap["limited_by"] == "tpot_p95_ms (broken already at the lowest step, 8 users)"
