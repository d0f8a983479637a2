"""The one step verdict (llmload.metrics.step_verdict) on hand-made rows, and the report and the
search judging the same rows the same way (issue 25, items 3 and 13)."""

from __future__ import annotations

import json

import numpy as np

from llmload.metrics.record import CSV_COLUMNS, RequestMeta, RequestRecord
from llmload.metrics.slo import SLO
from llmload.metrics.step_verdict import BROKEN, MET, NO_VERDICT, WindowRows, judge_step, monotone_capacity
from llmload.report import ReportOptions, build_report
from llmload.report.steps import judged_spans
from llmload.shapes.search import StepSample
from tests.support.report_rows import req, write_csv

RUN_ID = "20261201T120000Z-abcdef"
START = CSV_COLUMNS.index("start_time")
SLOS = [SLO("ttft_p95_ms", 2500.0), SLO("ttft_p95_ms", 1000.0, "rag"), SLO("error_rate", 0.01)]


def window(rag_ttfts, chat_ttfts) -> WindowRows:
    status = np.array(["ok"] * (len(rag_ttfts) + len(chat_ttfts)), dtype=object)
    scenario = np.array(["rag"] * len(rag_ttfts) + ["chat"] * len(chat_ttfts), dtype=object)
    return WindowRows(status, scenario, {"ttft_ms": np.array([*rag_ttfts, *chat_ttfts], dtype=float)})


def test_a_broken_scenario_slo_breaks_the_step_while_the_global_one_holds():
    """rag: 34 requests at 100 ms and 6 at 2,000 ms; chat: 40 at 100 ms. rag's p95 (rank 0.95 × 39 =
    37.05 of 0..39, among the 2,000s from rank 34) is 2,000 > 1,000; the whole run's (rank 75.05 of
    0..79, 2,000s from rank 74) is 2,000 ≤ 2,500. No failures: the error budget holds."""
    rows = window([100.0] * 34 + [2000.0] * 6, [100.0] * 40)
    v = judge_step(rows, SLOS, sample_floor=30, scenarios={"chat", "rag"}, duration_s=20.0)
    assert v.state == BROKEN and v.broken == ["rag:ttft_p95_ms"]
    assert v.slo["ttft_p95_ms"]["value"] == 2000.0 and v.slo["ttft_p95_ms"]["met"]
    assert v.slo["rag:ttft_p95_ms"]["value"] == 2000.0 and v.slo["rag:ttft_p95_ms"]["n"] == 40
    assert v.slo["error_rate"] == {**v.slo["error_rate"], "value": 0.0, "met": True, "n": 80}
    assert v.broken_text() == ["rag:ttft_p95_ms=2000>1000"] and (v.ok, v.requests) == (80, 80)
    # Where rag is fast the step meets every SLO.
    fast = judge_step(window([100.0] * 40, [2000.0] * 40), SLOS, 30, {"chat", "rag"}, 20.0)
    assert fast.state == MET and fast.broken == []


def test_a_thin_scenario_leaves_the_step_without_a_verdict():
    v = judge_step(window([100.0] * 20, [100.0] * 60), SLOS, 30, {"chat", "rag"}, 20.0)
    assert v.state == NO_VERDICT and v.thin and v.why == "rag: only 20 ok requests (< 30)"
    v = judge_step(window([100.0] * 10, [100.0] * 10), SLOS, 30, {"chat", "rag"}, 20.0)
    assert v.why == "only 20 ok requests (< 30); rag: only 10 ok requests (< 30)"
    # A scoped SLO of a scenario the run does not have is not judged (the report warns about it).
    v = judge_step(window([], [100.0] * 40), SLOS, 30, {"chat"}, 20.0)
    assert v.state == MET and "rag:ttft_p95_ms" not in v.slo


def test_a_section_of_one_scenario_keys_its_scoped_slo_by_the_metric():
    v = judge_step(window([100.0] * 34 + [2000.0] * 6, []), SLOS, 30, {"chat", "rag"}, 20.0, scope="rag")
    assert v.state == BROKEN and v.broken == ["ttft_p95_ms"]  # rag's own section: its limit replaces none here
    assert judge_step(window([100.0] * 40, []), [], 30, {"rag"}, 20.0).why == "no SLO given"


def test_failures_count_and_cancelled_requests_do_not():
    status = np.array(["ok"] * 38 + ["timeout"] * 2, dtype=object)
    rows = WindowRows(status, np.array(["chat"] * 40, dtype=object), {"ttft_ms": np.full(40, 100.0)})
    v = judge_step(rows, [SLO("error_rate", 0.01)], 30, {"chat"}, 10.0)
    assert v.state == BROKEN and v.slo["error_rate"]["value"] == 0.05


def test_monotone_capacity_is_the_reports_rule():
    assert monotone_capacity([(4, True), (8, True), (16, False), (32, True)]) == 8  # 32: noise above a failure
    assert monotone_capacity([(12, True), (16, True), (16, False)]) == 12  # a level fails if any step there does
    assert monotone_capacity([(4, False)]) is None and monotone_capacity([]) is None


def test_judged_windows_split_a_stretch_into_its_search_steps():
    spans = [(12.0, 100.0, 130.0), (16.0, 130.0, 170.0)]
    windows = [(16.0, 135.0, 150.0), (16.0, 151.0, 165.0)]  # a probe and its confirmation at 16
    assert judged_spans(spans, windows, 5.0) == [(12.0, 100.0, 105.0, 130.0), (16.0, 130.0, 135.0, 150.0),
                                                  (16.0, 150.0, 151.0, 165.0)]
    # A window that opened before its stretch (the first rows at 16 were a ramp): measured from the stretch.
    assert judged_spans([(16.0, 130.0, 170.0)], [(16.0, 128.0, 150.0)], 5.0) == [(16.0, 130.0, 130.0, 150.0)]


def search_row(start, users, scenario, ttft):
    meta = RequestMeta(f"r{start:.3f}-{scenario}", start, scenario, users=users, run_id=RUN_ID)
    return RequestRecord(meta, "ok", ttft_ms=ttft, tpot_ms=10.0, e2e_ms=400.0, completion_tokens=20,
                         prompt_tokens=50).row()


def test_the_report_judges_the_rows_the_search_judged(tmp_path):
    """The search judges a 16-user step at t = 130 on its settled rows and records its window; the
    report, given that window in PREFIX_run.json, measures the step over exactly those rows and
    reaches the same verdict, with the same values. Later requests of the step (rag slower still)
    are outside the window for both."""
    rows = []
    for i in range(400):  # 100.0 .. 139.9: 10 requests a second, chat and rag by turns
        t = 100.0 + i * 0.1
        scenario = "rag" if i % 2 else "chat"
        slow = scenario == "rag" and i % 10 == 1
        rows.append(search_row(t, 16, scenario, (1500.0 if t < 125 else 4000.0) if slow else 100.0))
    sample = StepSample(16, "users", 100.0, 2.0, SLOS, floor=30, scenarios={"chat", "rag"})
    sample.add([r for r in rows if r[START] + 0.4 < 129.0])  # what had arrived by t = 130 (lag 1 s)
    now, lag = 130.0, 1.0
    verdict = sample.judge(now, lag)
    until = sample.cut(now, lag)  # 130 − 1 − 1.5 × 0.4 = 128.4
    assert (sample.measure_from, round(until, 6)) == (102.0, 128.4)
    assert verdict.state == BROKEN and verdict.broken == ["rag:ttft_p95_ms"] and verdict.requests == 264
    names = ("run_id", "start_time", "scenario", "status", "ttft_ms", "tpot_ms", "e2e_ms", "users",
             "completion_tokens", "prompt_tokens", "request_id")
    dicts = [{c: r[CSV_COLUMNS.index(c)] for c in names} for r in rows]
    dicts.append(req(140.0, 8, scenario="chat") | {"run_id": RUN_ID, "request_id": "last"})
    prefix = write_csv(tmp_path / "s_requests.csv", dicts)
    probe = {"level": 16, "kind": "probe", "passed": False, "verdict": "broken", "measured_from": 102.0,
             "judged_until": until}
    (tmp_path / "s_run.json").write_text(json.dumps({"run_id": RUN_ID, "shape": {
        "class": "Search", "search": "users", "warmup_s": 2.0, "steps": [probe]}}))
    rep = build_report(prefix, ReportOptions(slos=[SLO("ttft_p95_ms", 2500.0), SLO("ttft_p95_ms", 1000.0, "rag")]))
    assert rep.warmup_s == 2.0
    (step,) = [s.data for s in rep.overall.steps if s.data["users"] == 16]
    assert (step["measured_from"], step["end_time"], step["requests"]) == (102.0, 128.4, verdict.requests)
    assert step["verdict"].startswith("broken") and step["slo"] == verdict.slo
    assert rep.overall.capacity["users"] is None  # the only judged level broke
    # Another warm-up asked for: the stretch's own window, and a note says so.
    other = build_report(prefix, ReportOptions(slos=[SLO("ttft_p95_ms", 1000.0, "rag")], warmup_s=3.0))
    (step,) = [s.data for s in other.overall.steps if s.data["users"] == 16]
    assert step["measured_from"] == 103.0 and step["end_time"] == 140.0
    assert any("not the search's warm-up" in n for n in other.notes)
