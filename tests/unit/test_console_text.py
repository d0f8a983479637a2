"""What llmload prints to the console never shows Python's ``None`` or ``nan`` (issue 32, item 6):
every console line of sweep, report, compare, history, calibrate and the search, fed the runs where
values are missing (no capacity, no price, no runner-up, one repeat, a failed cell), and capacity
always with its unit, money always with its ``$``."""

from __future__ import annotations

import re

from llmload.calibrate.command import format_step, summary_lines
from llmload.metrics.slo import SLO
from llmload.report import ReportOptions, build_report, parse_slo
from llmload.report.compare.archive import history_text
from llmload.report.compare.compare_render import comparison_text
from llmload.report.compare.compare_runs import compare_runs
from llmload.report.render import summary_text as report_text
from llmload.sweep.frontier import best_deployments, frontier_points
from llmload.sweep.report import cell_line
from llmload.sweep.report import summary_text as sweep_text
from tests.support.report_rows import req, write_csv
from tests.unit.test_search import FakePlugin, Search, make_shape, row

PYTHON_EMPTY = re.compile(r"\b(None|nan|NaN|inf)\b")


def _clean(text: str) -> str:
    assert text.strip()
    bad = [line for line in text.splitlines() if PYTHON_EMPTY.search(line)]
    assert not bad, "console lines with None/nan:\n" + "\n".join(bad)
    return text


def _cell(cid, dep, capacity, status="done", error=None, cost=None):
    return {"id": cid, "deployment": dep, "workload": "chat", "repeat": 1, "status": status, "gpus": 1,
            "gpu_hourly_usd": 2.0, "capacity": capacity, "cost": cost, "error": error,
            "steps": [{"level": 8, "users": 8, "output_tps": 900.0, "goodput_rps": 9.0, "thin": False,
                       "slo_met": capacity.get("level") is not None, "ttft_p95_ms": 90.0, "tpot_p95_ms": 9.0}]}


def test_the_sweeps_console_lines():
    cells = [_cell("slow.chat.r1", "slow", {"users": None, "rps": None, "output_tps": None,
                                            "limited_by": "tpot_p95_ms (broken already at the lowest step, 8 users)"}),
             _cell("mid.chat.r1", "mid", {"users": 8, "level": 8, "rps": 60.0, "output_tps": 1900.0},
                   cost={"usd_per_million_output_tokens": 0.294}),
             _cell("gone.chat.r1", "gone", {}, status="failed", error="cannot start 'PY': No such file\nlog...")]
    lines = [_clean(cell_line(i, 3, c["id"], c)) for i, c in enumerate(cells, 1)]
    assert lines[0] == "[1/3] slow.chat.r1: done, no capacity: tpot_p95_ms (broken already at the lowest step, 8 users)"
    assert lines[1] == "[2/3] mid.chat.r1: done, capacity 8 users, $0.294 per 1M output tokens"
    assert lines[2] == "[3/3] gone.chat.r1: failed: cannot start 'PY': No such file"
    priced = {"best": best_deployments(cells, 40.0, None, 0.3), "frontier": frontier_points(cells)}
    text = _clean(sweep_text(priced))
    assert text == ("chat: mid, 1 replica(s), 1 GPU(s), $1,460.00/month; no runner-up; margin larger than noise: "
                    "unknown (one repeat, or no runner-up)")
    unpriced = _clean(sweep_text({"best": best_deployments(cells, None, None, 0.3)}))
    assert "$0.292 per 1M output tokens" in unpriced  # no target: ranked by $ per 1M output tokens
    assert _clean(sweep_text({"best": best_deployments(cells[:1], 40.0, None, 0.3)})) == \
        "chat: no deployment meets the SLOs (no deployment met every SLO at any step)"


def _broken_run(tmp_path, name):
    return write_csv(tmp_path / f"{name}_requests.csv", [req(1000 + i * 0.1, 8, ttft=900.0) for i in range(100)])


def test_the_reports_compares_and_historys_console_lines_without_a_capacity(tmp_path):
    opts = ReportOptions(slos=[parse_slo("ttft_p95_ms=200")], warmup_s=1, gpu_hourly_usd=2.5, target_rps=20.0)
    rep = build_report(_broken_run(tmp_path, "a"), opts)
    text = _clean(report_text(rep))
    assert text.splitlines()[0] == ("capacity: none — limited by ttft_p95_ms (broken already at the lowest step, "
                                    "8 users)")
    assert "plan: none for 20.000 req/s (no capacity under the SLOs: no plan)" in text
    good = write_csv(tmp_path / "b_requests.csv", [req(1000 + i * 0.1, 8, ttft=90.0) for i in range(100)])
    ok = _clean(report_text(build_report(good, opts)))
    assert ok.startswith("capacity: 8 users, ") and "cost: $" in ok and "/month for 20.000 req/s" in ok
    no_price = _clean(report_text(build_report(good, ReportOptions(slos=opts.slos, warmup_s=1, target_rps=20.0))))
    assert "(no price: --gpu-hourly-usd)" in no_price
    cmp = compare_runs([_broken_run(tmp_path, "a"), good], ["broken", "good"], opts)
    assert "capacity (users or arrival req/s): none (ttft_p95_ms" in _clean(comparison_text(cmp))
    rows = [{"id": 1, "added_at": "2026-12-01T10:00:00", "source": "report", "model": None, "run_id": None,
             "prefix": "/runs/a", "capacity": '{"level": null, "limited_by": "x"}', "plan": None, "cell": None}]
    assert "None" not in _clean(history_text(rows))


def test_calibrates_console_lines_with_missing_values():
    step = {"streams": 64, "kind": "climb", "tps_per_process": 1000.0, "cpu_pct": 50.0, "mock_cpu_pct": 20.0,
            "ttft_err_p99_ms": None, "itl_max_err_p99_ms": None, "share": None, "spread": {}, "lag_p99_ms": None,
            "stalls": None, "stall_cpu_max_ms": None, "coalesced_share": None, "ok": False, "why": "lag"}
    _clean(format_step(step))
    result = {"per_process": {"max_streams": 0, "why": None, "max_tps": 0.0, "limit_found": False,
                              "limited_by": None, "confirmed": None},
              "tolerance": "TTFT err p99 < 1 ms", "scaling": None, "processes_needed": None, "cores": 2}
    _clean("\n".join(summary_lines(result)))


def test_the_search_says_what_the_lowest_load_did(monkeypatch):
    plugin = FakePlugin([SLO("ttft_p95_ms", 200.0)])
    shape = make_shape(Search, plugin, search_warmup_s=2.0)
    clock = {"now": 1000.0}
    monkeypatch.setattr("llmload.shapes.load_shapes.time.time", lambda: clock["now"])
    shape.reset_time()
    for _ in range(400):
        got = shape.tick()
        if got is None:
            break
        for listener in plugin.run.listeners:
            listener([row(clock["now"] + i * 0.05, got[0], 500.0) for i in range(20)])
        clock["now"] += 1.0
    assert "even the lowest load, 4 users, broke ttft_p95_ms" in _clean(plugin.stop_reason)
