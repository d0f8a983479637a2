"""Capacity verdicts on hand-made CSVs: exact step windows, failures that count, monotone capacity,
one capacity step for every number, thin and short steps, run identity, confidence. The right
numbers are worked out by hand in each test."""

from __future__ import annotations

import numpy as np
import pytest

from llmload.metrics.confidence import judge, quantile_ci
from llmload.metrics.record import CSV_COLUMNS
from llmload.report import ReportError, ReportOptions, build_report, parse_slo, write_report
from llmload.report.render import summary_text
from tests.support.report_rows import ladder, req, write_csv


def test_a_ramp_after_a_step_does_not_leak_into_it(tmp_path):
    """8 users for 60 s, then 1 user/s up to 16 with one slow request (TTFT 5,000 ms) at each count
    from 9 to 15, then 16 users. Step 8 ends at the first ramp row (t = 1060): users 8, measured
    1005 → 1060 = 55 s, TTFT p95 100 ms, SLO met. (Before: users 15, its window ran to the 16-user
    step at 1067 and took the seven slow requests in.)"""
    rows = ladder([(8, 60)])
    rows += [req(1060.0 + k, 9 + k, ttft=5000.0, e2e=6000.0) for k in range(7)]
    rows += ladder([(16, 20)], start=1067.0)
    prefix = write_csv(tmp_path / "a_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=1000")]))
    eight, sixteen = (s.data for s in rep.overall.steps)
    assert (eight["level"], eight["users"], eight["duration_s"]) == (8, 8, 55.0)
    assert eight["ttft_ms"]["p95"] == 100.0 and eight["slo_met"] is True
    # starts 1005.000 .. 1059.875 every 0.125 s = 440; 8 requests of 1 s in flight → 8.0 req/s
    assert eight["requests"] == 440 and eight["rps"] == 8.0
    assert sixteen["level"] == 16 and sixteen["start_time"] == 1067.0
    assert rep.overall.capacity["users"] == 16
    assert any("2 short stretch" in n or "7 short stretch" in n for n in rep.notes)


def failing_half(t0=1020.0, seconds=20, users=16):
    """``users`` users: every other request fails fast (503, 5 ms), the rest take 1 s."""
    rows = []
    for i in range(users * seconds):
        t = t0 + i / users
        if i % 2:
            r = req(t, users, ttft=None, e2e=5.0, status="http_5xx", tokens=None)
            r.update(http_status=503, tpot_ms=None, itl_max_ms=None)
            rows.append(r)
        else:
            rows.append(req(t, users))
    return rows


def test_b_failed_requests_count_against_the_slos_by_default(tmp_path):
    """8 users, all quick; then 16 users where half the requests fail fast with 503; then 4 users.
    Step 16's window [1025, 1040) has 240 starts, 120 failed: error_rate 0.5 > the default 0.01. So
    8 users is the capacity, limited by error_rate; the report says which budget it used."""
    rows = ladder([(8, 20)]) + failing_half() + ladder([(4, 10)], start=1040.0)
    prefix = write_csv(tmp_path / "b_requests.csv", rows)
    slo = [parse_slo("ttft_p95_ms=1000")]
    rep = build_report(prefix, ReportOptions(slos=slo))
    sixteen = rep.overall.steps[1].data
    assert sixteen["requests"] == 240 and sixteen["errors"] == 120 and sixteen["errors_by_status"] == {"http_5xx": 120}
    assert sixteen["slo"]["error_rate"]["value"] == 0.5 and sixteen["slo_met"] is False
    cap = rep.overall.capacity
    assert cap["users"] == 8 and cap["limited_by"] == "error_rate"
    assert "error_rate ≤ 0.01 (default" in rep.error_budget and "error budget: error_rate ≤ 0.01" in summary_text(rep)
    # Goodput: the ok half starts every 0.125 s and lasts 1 s → 8 req/s; failures are never good.
    assert sixteen["rps"] == 8.0 and sixteen["goodput_rps"] == 8.0
    # Overridden, and switched off: then 16 users passes on latency alone.
    assert build_report(prefix, ReportOptions(slos=slo, error_budget=0.6)).overall.capacity["users"] == 16
    off = build_report(prefix, ReportOptions(slos=slo, error_budget=None))
    assert off.overall.capacity["users"] == 16 and off.error_budget.startswith("off")
    assert "error_rate" not in off.overall.steps[1].data["slo"]


def test_default_error_budget_by_hand(tmp_path):
    """Step 8 (60 s): 440 starts in [1005, 1060), 2 failed = 0.45 % ≤ 1 %: met. Step 16 (60 s, the
    last, so it ends at its last start 1119.9375): starts in [1065, 1119.9375) are i = 80 .. 958 =
    879, 18 failed = 2.05 % > 1 %: broken."""
    rows = ladder([(8, 60), (16, 60)])
    for i in (100, 200):  # in step 8's window (t = 1012.5, 1025)
        rows[i].update(status="timeout", ttft_ms=None, e2e_ms=60000.0)
    for k in range(18):  # step 16 starts at row 480; rows 480 + 100 + 40k are in its window
        rows[580 + 40 * k].update(status="stream_error", ttft_ms=80.0)
    prefix = write_csv(tmp_path / "eb_requests.csv", rows)
    rep = build_report(prefix)
    a, b = (s.data for s in rep.overall.steps)
    assert (a["requests"], a["errors"]) == (440, 2) and a["slo"]["error_rate"]["value"] == pytest.approx(2 / 440,
                                                                                                       abs=1e-4)
    assert (b["requests"], b["errors"]) == (879, 18) and b["slo"]["error_rate"]["value"] == pytest.approx(
        18 / 879, abs=1e-4)
    assert a["slo_met"] is True and b["slo_met"] is False
    assert rep.overall.capacity["users"] == 8 and rep.overall.capacity["limited_by"] == "error_rate"
    # The stream errors had a TTFT of 80 ms and met the latency SLOs: still, a failed request is never good.
    assert b["goodput_rps"] == b["rps"] < 16.0
    looser = build_report(prefix, ReportOptions(slos=[parse_slo("error_rate=0.05")]))
    assert looser.overall.capacity["users"] == 16 and "--slo error_rate" in looser.error_budget


def test_c_capacity_is_monotone(tmp_path):
    """8 users pass, 16 fail (TTFT 3,000 ms), 32 pass: capacity is 8, and 32 is a warning."""
    rows = ladder([(8, 20), (16, 20), (32, 20)], ttft={16: 3000.0})
    prefix = write_csv(tmp_path / "c_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=1000")]))
    assert [s.data["slo_met"] for s in rep.overall.steps] == [True, False, True]
    cap = rep.overall.capacity
    assert cap["users"] == 8 and cap["limited_by"] == "ttft_p95_ms" and cap["next_step_level"] == 16
    assert cap["non_monotone"] == [32]
    assert any(w.startswith("non-monotone") and "32 users" in w and "rerun with longer steps" in w
               for w in rep.warnings)
    assert "non-monotone" in summary_text(rep)


def test_f_one_capacity_step_gives_every_number(tmp_path):
    """A hold shape revisits 8 users: 8 (prompts of 100 tokens), 16 (broken), 8 again (prompts of
    500). Capacity is the last step at 8 users, and cost uses its numbers only: 8 req/s, output
    8 × 91 = 728 tok/s, input 8 × 500 = 4,000 tok/s. With $3.60/h and an output weight of 1 the hour
    is spread over 4,728 tok/s = 17,020,800 tokens: $0.211505 per 1M input tokens. (Before, input
    tok/s came from the first 8-user step: 800.)"""
    rows = ladder([(8, 20)]) + ladder([(16, 20)], ttft={16: 3000.0}, start=1020.0) + \
        ladder([(8, 20)], prompt=500, start=1040.0)
    prefix = write_csv(tmp_path / "f_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=1000")], gpu_hourly_usd=3.6,
                                             output_cost_weight=1.0))
    cap = rep.overall.capacity
    assert cap["level"] == 8 and cap["start_time"] == 1040.0
    assert (cap["rps"], cap["output_tps"], cap["total_tps"]) == (8.0, 728.0, 4728.0)
    assert rep.overall.cost["usd_per_million_input_tokens"] == pytest.approx(3.6 / (4728 * 3600) * 1e6)
    assert rep.overall.cost["usd_per_request"] == pytest.approx(3.6 / (8 * 3600))


def test_a_thin_top_step_is_never_capacity_nor_priced(tmp_path):
    """The ladder recipe (docs/report.md) without a stop timeout: the last step (64 users) kept 2 ok requests in
    its window, the rest cancelled. It has no verdict; capacity is 8 users, priced at 8 req/s, and
    the console line says why 64 is not it."""
    rows = ladder([(8, 60)])
    for i in range(64):  # 64 users from t = 1060: starts every 0.1 s; those from 1065 on are in the window
        rows.append(req(1060.0 + i * 0.1, 64, status="ok" if i in (50, 51) else "cancelled"))
    prefix = write_csv(tmp_path / "thin_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=1000")], gpu_hourly_usd=3.6))
    top = rep.overall.steps[-1].data
    assert top["users"] == 64 and top["ok"] == 2 and top["thin"] and top["verdict"] == "too few requests"
    cap = rep.overall.capacity
    assert cap["users"] == 8 and cap["thin_above"] == [{"level": 64, "users": 64, "ok": 2}]
    assert rep.overall.cost["usd_per_request"] == pytest.approx(3.6 / (8 * 3600))
    line = summary_text(rep).splitlines()[0]
    assert line.startswith("capacity: 8 users") and "caveat: 64: only 2 ok requests, no verdict" in line
    assert any("only 2 ok requests" in w for w in rep.warnings)


def test_a_short_step_agrees_with_littles_law(tmp_path):
    """16 users, each request 3 s, phases spread; at t = 1030, 16 more users join all at once and
    every request from then on takes 5.5 s; at 1042, 48 users. Step 32's window is [1034, 1042),
    8 s. Every user is busy with 5.5-s requests throughout it, so Little's law gives 32 / 5.5 =
    5.818 req/s, and so does the edge-corrected count (each user: 8 / 5.5 requests' worth). Counting
    completions in the window instead gives 54 / 8 = 6.75 (+16 %: the cohort completes twice)."""
    rows = []
    for j in range(48):
        t = 1000.0 + j * 3.0 / 16 if j < 16 else (1030.0 if j < 32 else 1042.0)
        while t < 1072.0:
            users = 16 if t < 1030 else (32 if t < 1042 else 48)
            e2e = 3000.0 if t < 1030 else 5500.0
            rows.append(req(t, users, e2e=e2e, ttft=100.0))
            t += e2e / 1000.0
    rows.sort(key=lambda r: r["start_time"])
    prefix = write_csv(tmp_path / "little_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(warmup_s=4.0))
    step = next(s.data for s in rep.overall.steps if s.data["users"] == 32)
    assert step["duration_s"] == 8.0
    little = 32 / 5.5
    assert abs(step["rps"] - little) / little < 0.05
    assert step["rps"] == pytest.approx(5.8182, abs=1e-4)
    assert step["short"] is True
    assert any("measured 8.0 s, shorter than 3 × its mean E2E (5.5 s)" in w and "at least 9 s longer" in w
               for w in rep.warnings)  # 8 s + 9 s >= 16.5 s


def test_the_advice_for_a_short_last_step_is_enough_when_followed(tmp_path):
    """The last step's window ends at its last request's start, not at the step's end: advice of
    "at least warm-up + 3 × E2E s long" (here 4 + 15 = 19 s) came back when followed. The advice is
    in seconds to add, so the same run with steps that much longer is not short any more."""
    def run(step_s: float) -> list[str]:
        rows = []
        for u in range(8):  # 8 users, 5-s requests, the last ones starting 2.5 s before the end on average
            t = 1000.0 + u * 5.0 / 8
            while t + 5.0 <= 1000.0 + step_s + 5.0 * u / 8:
                rows.append(req(t, 8, e2e=5000.0, ttft=100.0))
                t += 5.0
        rows.sort(key=lambda r: r["start_time"])
        prefix = write_csv(tmp_path / f"last{step_s:g}_requests.csv", rows)
        return [w for w in build_report(prefix, ReportOptions(warmup_s=4.0)).warnings if "shorter than" in w]

    first = run(19.0)
    assert len(first) == 1 and "at least" in first[0], first
    more = int(first[0].split("at least ")[1].split(" s longer")[0])
    assert run(19.0 + more) == []


def test_rows_of_several_runs_are_refused_unless_one_is_picked(tmp_path):
    first = ladder([(8, 20)])
    second = ladder([(16, 20)], start=2000.0)
    for r in first:
        r["run_id"] = "20261130T100000Z-aaaaaa"
    for r in second:
        r["run_id"] = "20261130T110000Z-bbbbbb"
    prefix = write_csv(tmp_path / "two_requests.csv", first + second)
    with pytest.raises(ReportError, match=r"rows of 2 runs \(20261130T100000Z-aaaaaa: 160 rows.*--run-id"):
        build_report(prefix)
    rep = build_report(prefix, ReportOptions(run_id="20261130T110000Z-bbbbbb"))
    assert rep.run_id == "20261130T110000Z-bbbbbb" and len(rep.df) == 320 and rep.overall.steps[0].data["users"] == 16
    with pytest.raises(ReportError, match="no rows of run 'nope'"):
        build_report(prefix, ReportOptions(run_id="nope"))
    # Rows without an id next to one run (a late worker's first rows, shipped before its master
    # told it the run id) are that run's, with a warning.
    for r in first[:10]:
        r["run_id"] = None
    partial = write_csv(tmp_path / "partial_requests.csv", first)
    rep = build_report(partial)
    assert rep.run_id == "20261130T100000Z-aaaaaa" and len(rep.df) == 160
    assert any("10 row(s) without a run_id were read as run 20261130T100000Z-aaaaaa's" in w for w in rep.warnings)
    # A file written before runs had ids (no run_id column) is one run.
    legacy = tmp_path / "old_requests.csv"
    cols = [c for c in CSV_COLUMNS if c != "run_id"]
    legacy.write_text(",".join(cols) + "\n" + "".join(
        ",".join("" if r.get(c) is None else str(r[c]) for c in cols) + "\n" for r in first + second))
    old = build_report(str(legacy)[: -len("_requests.csv")])
    assert old.run_id is None and [s.data["users"] for s in old.overall.steps] == [8, 16]
    assert not any("run_id" in w for w in old.warnings)


def test_intervals_and_borderline_verdicts_by_hand():
    values = np.arange(1.0, 101.0)
    # n = 100, p95: ranks ⌊95.5 − 1.96·√4.75⌋ = ⌊91.23⌋ = 91 and ⌈99.77⌉ = 100 → [91, 100]
    assert quantile_ci(values, 95) == (91.0, 100.0)
    # p50: ⌊50.5 − 9.8⌋ = 40, ⌈60.3⌉ = 61
    assert quantile_ci(values, 50) == (40.0, 61.0)
    # 30 samples cannot bound a p95 from above: rank ⌈29 + 2.34⌉ = 32 > 30
    assert quantile_ci(np.arange(1.0, 31.0), 95)[1] is None
    # p95 = 95.05 ≤ 96 is met, but 96 is inside [91, 100]: borderline. 96 % of samples are ≤ 96,
    # |F − q| = 0.01, z·√(q(1−q)) = 1.959964 · 0.217945 = 0.427164: √n = (0.427164 +
    # √(0.182469 + 0.02)) / 0.02 = (0.427164 + 0.449966) / 0.02 = 43.8565, n = 1923.4 → 1,924 − 100
    # = 1,824 more requests, 182.4 s at 10 requests/s.
    v = judge(parse_slo("ttft_p95_ms=96"), values, errors=0, finished=100, rate_per_s=10.0)
    assert v["met"] and v["borderline"] and v["ci95"] == [91.0, 100.0] and v["n"] == 100
    assert v["settle_requests"] == 1824 and v["settle_seconds"] == 182.4
    # Every sample under the limit: a p95 needs 92 samples to be bounded from above (rank
    # ⌈92 · 0.95 + 0.5 + 1.96 · √(92 · 0.0475)⌉ = ⌈91.99⌉ = 92 ≤ 92), so 30 samples need 62 more.
    thirty = judge(parse_slo("ttft_p95_ms=200"), np.arange(1.0, 31.0), 0, 30, 10.0)
    assert thirty["ci95"][1] is None and thirty["settle_requests"] == 62
    assert quantile_ci(np.arange(1.0, 93.0), 95)[1] == 92.0 and quantile_ci(np.arange(1.0, 92.0), 95)[1] is None
    far = judge(parse_slo("ttft_p95_ms=200"), values, errors=0, finished=100, rate_per_s=10.0)
    assert far["met"] and not far["borderline"] and "settle_requests" not in far
    # No failure: an error budget is never borderline (the budget is about failures seen).
    assert not judge(parse_slo("error_rate=0.01"), np.empty(0), 0, 100, 10.0)["borderline"]


def test_a_failing_lowest_step_with_passing_ones_above_is_no_capacity_and_a_warning(tmp_path):
    """4 users break the TTFT SLO, 8 and 16 meet it: no capacity (broken at the lowest step),
    and 8 and 16 are non-monotone."""
    rows = ladder([(4, 20), (8, 20), (16, 20)], ttft={4: 3000.0})
    prefix = write_csv(tmp_path / "low_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=1000")], gpu_hourly_usd=1.0))
    cap = rep.overall.capacity
    assert cap["users"] is None and "lowest step, 4 users" in cap["limited_by"] and cap["non_monotone"] == [8, 16]
    assert rep.overall.cost is None
    assert any("step(s) at 8, 16 users met every SLO above the failing step at 4 users" in w for w in rep.warnings)


def test_the_console_says_what_would_settle_a_borderline_verdict_as_the_page_does(tmp_path):
    """Issue 32, item 14: the console printed `[caveat: borderline: ttft_p95_ms at 8]`; the page said
    how many more requests (and seconds at that step) would settle it. One sentence, both places."""
    rows = ladder([(4, 20)])
    t = rows[-1]["start_time"] + 1
    rows += [req(t + i / 8, 8, ttft=float(50 + i % 100)) for i in range(160)]  # p95 ≈ 145, limit 146: borderline
    prefix = write_csv(tmp_path / "edge_requests.csv", rows)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=146")], warmup_s=1))
    cap = rep.overall.capacity
    assert cap["users"] == 8 and cap["borderline"] == ["ttft_p95_ms at 8"]
    step = next(s.data for s in rep.overall.steps if s.data["users"] == 8)
    v = step["slo"]["ttft_p95_ms"]
    said = (f"about {v['settle_requests']:,} more requests, or {v['settle_seconds']:g} s more at this step, "
            "would settle it")
    console = summary_text(rep)
    assert f"[caveat: borderline: ttft_p95_ms at 8 users: {said}]" in console, console
    write_report(rep, str(tmp_path / "out"))
    page = (tmp_path / "out" / "report.html").read_text()
    assert f"met — borderline: {said}" in page and f"ttft_p95_ms at 8 users: {said}" in page
