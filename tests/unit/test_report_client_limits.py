"""The report names the steps the load generator itself limited (PREFIX_llm_history.csv's
``client_limited``): CI's vLLM ladder had a 2-user step whose TTFT p95 a starved client made 623 ms
(vLLM's own 209 ms), and the report said nothing of it."""

from __future__ import annotations

import json

import pandas as pd

from llmload.report import ReportOptions, build_report, write_report
from llmload.report.sections.client_limits import flag_client_limited_steps, limited_intervals
from llmload.report.steps import Step
from tests.support.report_rows import req, write_csv

HISTORY_HEAD = "time,scenario,client_limited,client_cause,client_others_cpu_max\n"


def _history(path, limited_at: dict[float, str]) -> None:
    """One history row every 2 s over 1000..1040, two scenarios' rows per time as the live view writes."""
    lines = [HISTORY_HEAD]
    for t in range(1002, 1042, 2):
        cause = limited_at.get(float(t), "")
        for scenario in ("chat", "Aggregated"):
            lines.append(f"{t},{scenario},{bool(cause)},{cause},{195.1 if cause == 'machine' else 3.0}\n")
    path.write_text("".join(lines))


def test_a_step_overlapping_a_limited_interval_is_flagged_once_and_the_other_is_not():
    df = pd.DataFrame({"time": [1002.0, 1002.0, 1004.0, 1004.0, 1006.0], "scenario": ["a", "b", "a", "b", "a"],
                       "client_limited": [False, False, True, True, False],
                       "client_cause": ["", "", "machine", "machine", ""],
                       "client_others_cpu_max": [1.0, 1.0, 195.1, 190.0, 2.0]})
    (one,) = limited_intervals(df)  # both scenarios' rows of 1004 are one interval
    assert (one.start, one.end, one.causes, one.others_cpu) == (1002.0, 1004.0, ("machine",), 195.1)
    early = Step(users=1, start=990.0, end=1001.0, measured_from=992.0)
    hit = Step(users=2, start=1001.0, end=1020.0, measured_from=1003.0)
    for s in (early, hit):
        s.data["level"] = float(s.users)
    warnings = flag_client_limited_steps([early, hit], [one], "users")
    assert "client_limited" not in early.data
    assert hit.data["client_limited"] == {"intervals": 1, "causes": ["machine"], "others_cpu_max": 195.1,
                                          "at": [1004.0]}
    assert warnings == ["the load generator itself was limited during the step at 2 users (1 interval(s) of 2 s; "
                        "the machine was busy: other processes used up to 195 % of a core): its client-side "
                        "latencies there include time the client lost, not only the server's; rerun that step"]


def test_the_report_json_and_page_carry_the_flag_and_a_run_without_a_history_has_none(tmp_path):
    rows = [req(1000 + i * 0.5, 4) for i in range(40)] + [req(1020 + i * 0.25, 8) for i in range(80)]
    prefix = write_csv(tmp_path / "run_requests.csv", rows)
    assert "client_limited" not in json.dumps([s.data for s in build_report(prefix).overall.steps])
    _history(tmp_path / "run_llm_history.csv", {1030.0: "process"})
    rep = build_report(prefix, ReportOptions(warmup_s=5.0))
    a, b = (s.data for s in rep.overall.steps)
    assert "client_limited" not in a and b["client_limited"]["causes"] == ["process"]
    (said,) = [w for w in rep.warnings if "load generator itself" in w]
    assert "the step at 8 users" in said and "cause: process; the run's client verdict (PREFIX_run.json)" in said
    write_report(rep, str(tmp_path / "report"))
    data = json.loads((tmp_path / "report" / "report.json").read_text())
    assert data["steps"][1]["client_limited"]["intervals"] == 1
    page = (tmp_path / "report" / "report.md").read_text()
    assert "load generator itself was limited during the step at 8 users" in page


def test_a_history_that_cannot_be_read_costs_the_report_nothing(tmp_path):
    prefix = write_csv(tmp_path / "run_requests.csv", [req(1000 + i * 0.5, 4) for i in range(40)])
    (tmp_path / "run_llm_history.csv").write_text("time,scenario\n1002,chat\n")  # no client columns: older run
    assert build_report(prefix).overall.steps
    (tmp_path / "run_llm_history.csv").write_text('time,client_limited\n"unclosed,1\n')
    assert build_report(prefix).overall.steps
