"""The metric catalog: every entry shows on every surface it declares (llm_stats rows, live rows, the
LLM tab, the end-of-run table, the report's step table, SLOs), built from small hand-made data;
and no module but the catalog types a derived name."""

from __future__ import annotations

import ast
import os
from dataclasses import fields

import pytest

from llmload.metrics import catalog
from llmload.metrics.histogram import Histogram
from llmload.metrics.record import CSV_COLUMNS, RequestMeta, RequestRecord
from llmload.metrics.slo import METRIC_HELP, parse_slo
from llmload.metrics.stats import LLMStats
from llmload.plugin.output.end_of_run import format_summary
from llmload.plugin.output.live import LiveWindow
from llmload.plugin.output.run_files import HISTORY_COLUMNS
from llmload.plugin.web import llm_tab
from llmload.report import ReportOptions, build_report
from llmload.report.render import blocks
from tests.support.processes import ROOT
from tests.support.report_rows import req, write_csv


def record(i: int, scenario: str = "chat") -> RequestRecord:
    """An ok request with every per-request metric and two ITL gaps, distinct per ``i``."""
    return RequestRecord(meta=RequestMeta(f"r{i}", 1000.0 + i * 0.1, scenario), status="ok", ttft_ms=50.0 + i,
                         ttft_visible_ms=60.0 + i, tpot_ms=5.0 + i / 10, e2e_ms=500.0 + i, itl_max_ms=9.0 + i,
                         prompt_tokens=100, completion_tokens=20, itl_ms=[4.0, 6.0 + i / 10])


def test_every_metric_is_declared_consistently():
    names = [m.name for m in catalog.METRICS]
    assert len(set(names)) == len(names) and set(catalog.BY_NAME) == set(names)
    record_fields = {f.name for f in fields(RequestRecord)}
    for m in catalog.METRICS:
        assert m.label and m.description and m.unit == "ms", m
        assert set(m.tab) <= set(m.live), m  # the tab shows live values only
        if m.row_column is not None:
            assert m.row_column in CSV_COLUMNS and m.row_column in record_fields, m
            assert m.report, f"{m.name}: a per-request metric belongs in the report's step table"
        else:
            assert not m.report and not m.slo, f"{m.name}: the report and SLOs read request rows; it has none"
    # every old spelling maps to a key that exists
    assert set(catalog.RENAMED.values()) <= set(catalog.live_keys())


def test_every_metric_in_llm_stats_rows():
    stats = LLMStats()
    for i in range(20):
        stats.add(record(i))
    (row,) = stats.rows()
    for m in catalog.METRICS:
        for col in m.stats_columns():
            assert row.get(col) is not None, col
    assert row["median_ttft_ms"] == pytest.approx(59.0, rel=0.011) and row["max_itl_max_ms"] == 28.0
    assert row["p99_itl_ms"] == pytest.approx(7.9, rel=0.011)  # per chunk: the 40 gaps, not per request


def test_every_metric_in_live_rows_the_history_csv_and_the_tab():
    live = LiveWindow(window_s=10)
    itl = Histogram()
    for i in range(40):
        rec = record(i)
        live.add_row(rec.row())
        itl.record_many(rec.itl_ms)
    live.add_itl("chat", itl, 1003.0)
    (row,) = live.snapshot(now=1012.0, lag_s=1.0)
    for m in catalog.METRICS:
        for st in m.live:
            assert row[m.key(st)] is not None and m.key(st) in HISTORY_COLUMNS, m.key(st)
    assert row["itl_max_max_ms"] == 48.0 and row["worst_stall_ms"] == 48.0  # the old key, one release
    assert set(catalog.RENAMED) <= set(HISTORY_COLUMNS)
    tab = dict(llm_tab.TABLE)
    stats = LLMStats()
    stats.add(record(0))
    (summary,) = stats.rows()
    for m in catalog.METRICS:
        for st in m.tab:
            assert tab[m.key(st)] == m.title(st, unit=True)
            assert llm_tab.STOPPED[m.key(st)] in summary  # the whole run's value once stopped
            # on exactly one of the two tabs: the first when the catalog says so, else "LLM details"
            on = [cols for cols in (llm_tab.DEFAULT, llm_tab.DETAILS) if m.key(st) in dict(cols)]
            assert on == [llm_tab.DEFAULT if st in m.tab_default else llm_tab.DETAILS], (m.name, st)
        assert set(m.tab_default) <= set(m.tab), m
    charts = {c["name"]: c for c in catalog.dashboard_spec()}
    assert set(charts) == {m.name for m in catalog.METRICS if m.dashboard}
    assert all(s["key"] in row for c in charts.values() for s in c["series"])


def test_every_summary_statistic_in_the_end_of_run_table():
    stats = LLMStats()
    for i in range(20):
        stats.add(record(i))
    text = format_summary(stats.rows())
    head = text.splitlines()[1]
    for m in catalog.METRICS:
        if m.summary:
            assert m.title(m.summary[0]) in head, m.name
    assert len(head.split()) == 7 + sum(len(m.summary) for m in catalog.METRICS) + sum(
        1 for m in catalog.METRICS if m.summary)  # "TTFT p50" is two words, then "p95", ...


def test_every_row_metric_in_the_reports_step_table(tmp_path):
    rows = []
    for i in range(60):
        r = req(1000 + i * 0.5, 4, ttft=100.0 + i)
        r["ttft_visible_ms"] = 120.0 + i
        rows.append(r)
    report = build_report(write_csv(tmp_path / "run_requests.csv", rows), ReportOptions(warmup_s=1.0))
    table = next(b for b in blocks(report) if b.heading == "Steps (whole run)")
    (cells,) = table.rows
    by_header = dict(zip(table.header, cells, strict=True))
    step = report.overall.steps[0].data
    for m in catalog.ROW_METRICS:
        cell = by_header[f"{m.label} {'/'.join(m.report)}"]
        assert "–" not in cell and len(cell.split(" / ")) == len(m.report), (m.name, cell)
        assert {f"p{q}" for q in catalog.REPORT_PERCENTILES} <= set(step[m.row_column])  # report.json


def test_slo_names_come_from_the_catalog():
    for m in catalog.METRICS:
        if m.slo:
            slo = parse_slo(f"{m.key('p95')}=100")
            assert slo.name == m.name and slo.column == m.row_column and m.name in METRIC_HELP
        else:
            with pytest.raises(ValueError, match="unknown metric"):
                parse_slo(f"{m.key('p95')}=100")
    assert parse_slo("task_p95_s=30").per_task


def _string_constants(path: str) -> set[str]:
    """Every string literal of a module that is not a docstring."""
    with open(path) as f:
        tree = ast.parse(f.read())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs}


def test_no_module_but_the_catalog_types_a_derived_name():
    derived = {*catalog.live_keys(), *catalog.RENAMED,
               *(c for m in catalog.METRICS for c in m.stats_columns())}
    typed = {}
    # server_metrics spells the server's own TTFT/TPOT samples the client's way on purpose (side by side)
    own = (os.path.join("metrics", "catalog.py"), os.path.join("llmload", "server_metrics", ""))
    for base, _dirs, files in os.walk(os.path.join(ROOT, "llmload")):
        for f in files:
            path = os.path.join(base, f)
            if f.endswith(".py") and not path.endswith(own[0]) and own[1] not in path:
                hits = _string_constants(path) & derived
                if hits:
                    typed[os.path.relpath(path, ROOT)] = sorted(hits)
    assert not typed, f"derive these from llmload.metrics.catalog instead: {typed}"
