"""The whole run's capacity holds every SLO, the scenario-scoped ones included (issue 25, item 13)."""

from __future__ import annotations

from llmload.metrics.slo import parse_slo
from llmload.report import ReportOptions, build_report
from tests.support.report_rows import req, write_csv


def mixed_run(tmp_path) -> str:
    """chat and rag half each; 8 users then 16 users, 30 s each. At 16 users rag's TTFT is 2,000 ms
    (p95 over its limit of 1,000) while chat stays at 200 ms: the whole run's p95 alone would pass."""
    rows = []
    for i in range(120):
        t = 1000 + i * 0.25
        rows.append(req(t, 8, ttft=200.0, scenario="chat" if i % 2 else "rag"))
    for i in range(240):
        t = 1030 + i * 0.125
        scenario = "chat" if i % 2 else "rag"
        rows.append(req(t, 16, ttft=2000.0 if scenario == "rag" and i % 20 < 18 else 200.0, scenario=scenario))
    for r in rows:
        r["request_id"] = f"r{r['start_time']}-{r['scenario']}"
    return write_csv(tmp_path / "mixed_requests.csv", rows)


def test_a_broken_scenario_slo_limits_the_whole_run(tmp_path):
    prefix = mixed_run(tmp_path)
    slos = [parse_slo("chat:ttft_p95_ms=1000"), parse_slo("rag:ttft_p95_ms=1000")]
    rep = build_report(prefix, ReportOptions(slos=slos, warmup_s=2.0, gpu_hourly_usd=2.0))
    assert rep.scenarios["rag"].capacity["users"] == 8
    assert rep.scenarios["chat"].capacity["users"] == 16
    cap = rep.overall.capacity
    assert cap["users"] == 8, cap
    assert "rag:ttft_p95_ms" in cap["limited_by"]
    second = rep.overall.steps[1].data
    assert second["verdict"].startswith("broken") and not second["slo"]["rag:ttft_p95_ms"]["met"]
    # the price and the plan are of the whole run's capacity
    assert rep.overall.cost["usd_per_request"] == round(2.0 / (cap["rps"] * 3600.0), 8)


def test_without_scoped_slos_the_whole_run_is_judged_as_before(tmp_path):
    prefix = mixed_run(tmp_path)
    rep = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=5000")], warmup_s=2.0))
    assert rep.overall.capacity["users"] == 16
    assert all(":" not in k for s in rep.overall.steps for k in s.data["slo"])
