"""The LLM tabs (issue 25): at most 10 columns on the first, one header form ("TTFT p50 (ms)"),
3 significant digits for every measured number (a number in the JSON), the whole run once stopped."""

from __future__ import annotations

import re

import pytest

from llmload.metrics import catalog
from llmload.plugin.web import llm_tab
from llmload.plugin.web.llm_tab import DEFAULT, DETAILS, TABLE, tab_rows, three_digits


class View:
    def __init__(self, latest=(), stats=(), finished=False, state="running", samples=()):
        self._latest, self._stats, self.run_finished, self._state = list(latest), list(stats), finished, state
        self._samples = list(samples)

    def runner_state(self):
        return self._state

    def stats_rows(self):
        return self._stats

    def latest_rows(self):
        return self._latest

    def client_health(self):
        return [{"worker": 0, "cpu": 23.4, "limited": False}]

    def server_samples(self):
        return self._samples

    def has_tasks(self):
        return any(r.get("tasks") for r in self._stats)


@pytest.mark.parametrize(("value", "text"), [
    (0.9805, "0.981"), (0.839, "0.839"), (57.234, "57.2"), (5.0, "5.00"), (12345.6, "12300"), (999.6, "1000"),
    (0.9996, "1.00"), (0.0001234, "0.000123"), (0.0, "0"), (123.4, "123"), (7, 7), (None, "–"), ("stopped", "stopped"),
])
def test_three_significant_digits(value, text):
    assert three_digits(value) == text


def test_the_first_tab_has_at_most_10_columns_and_every_header_one_unit_form():
    assert len(DEFAULT) <= 10 and DEFAULT[0] == DETAILS[0] == ("scenario", "Scenario")
    assert {k for k, _ in TABLE} == {k for k, _ in (*DEFAULT, *DETAILS)} and len(TABLE) == len(dict(TABLE))
    for _key, title in TABLE:
        # a unit, when there is one, in parentheses at the end: "TTFT p50 (ms)", "Output (tok/s)"
        assert re.fullmatch(r"[A-Z][-A-Za-z0-9 /]*( \((ms|s|%|req/s|tok/s)\))?", title), title
        assert not re.search(r"\b(ms|tok/s|req/s)$", title), title
    ttft = catalog.BY_NAME["ttft"]
    assert dict(DEFAULT)[ttft.key("p50")] == "TTFT p50 (ms)"


def _live_row(scenario="chat", **kw):
    row = {"scenario": scenario, "window_s": 10.0, "in_flight": 7, "rps": 12.3456, "output_tps": 1234.56,
           "errors": 0, "ok": 40, "errors_by_status": {}, "cache_hit_ratio": 0.98051}
    for m in catalog.METRICS:
        for st in m.live:
            row[m.key(st)] = 57.2345
    row.update(kw)
    return row


def test_live_rows_have_3_significant_digits_and_the_server_cells():
    sample = {"running": 2.0, "waiting": 0.0, "kv_usage_pct": 12.345, "prefix_hit_rate": 0.9812,
              catalog.BY_NAME["ttft"].key("mean"): 41.26}
    (row,) = tab_rows(View(latest=[_live_row()], samples=[sample]))
    ttft = catalog.BY_NAME["ttft"]
    assert row["window"] == "last 10 s" and row["in_flight"] == 7 and row["errors"] == 0
    # one number a cell: a number (3 significant digits), for scripts and Locust's page alike (issue 32, item 18)
    assert row["rps"] == 12.3 and row["output_tps"] == 1230.0 and row[ttft.key("p95")] == 57.2
    assert row["cache_hit_ratio"] == 98.1 and row["client"] == "ok (CPU max 23 %)"
    assert row["server_queue"] == "2 / 0" and row["server_kv"] == 12.3 and row["server_hit"] == 98.1
    assert row["server_ttft"] == "41.3 / 57.2"  # two numbers a cell: text
    assert set(row) >= {k for k, _ in TABLE}


def test_errors_first_then_the_scenarios():
    rows = tab_rows(View(latest=[_live_row(errors=30, ok=10, errors_by_status={"http_500": 30},
                                           errors_dominate=True)]))
    assert [r["scenario"] for r in rows] == ["SERVER ERRORS", "chat"]
    assert rows[0]["window"] == "75 % failed" and rows[0]["errors"] == 30 and rows[1]["client"].startswith("not judged")


def test_once_stopped_the_whole_run_with_3_significant_digits():
    ttft = catalog.BY_NAME["ttft"]
    stats = {"scenario": "chat", "duration_s": 42.4, "rps": 3.14159, "output_tps": 61.0, "failures": 2,
             "http_5xx": 2, **{llm_tab.STOPPED[ttft.key(st)]: 61.234 for st in ttft.tab}}
    (row,) = tab_rows(View(stats=[stats], finished=True, state="stopped"))
    assert row["window"] == "whole run (42 s), stopped" and row["in_flight"] == "stopped"
    assert row["rps"] == 3.14 and row["output_tps"] == 61.0 and row[ttft.key("p99")] == 61.2
    assert row["errors"] == 2 and row["errors_text"] == "http_5xx 2" and row["server_queue"] == "–"


def test_task_and_session_times_come_from_the_whole_run_so_far():
    """A live window would cut most sessions in two: the cell is the run's p50 / p95 so far, per scenario."""
    stats = [{"scenario": "agent", "tasks": 12, "median_task_s": 4.25, "p95_task_s": 9.871},
             {"scenario": "chat", "tasks": 0, "median_task_s": None, "p95_task_s": None}]
    rows = tab_rows(View(latest=[_live_row("agent"), _live_row("chat")], stats=stats))
    assert [r["tasks"] for r in rows] == ["4.25 / 9.87", "–"]
    assert [r["tasks"] for r in tab_rows(View(latest=[_live_row("chat")]))] == ["–"]
    stopped = tab_rows(View(stats=stats, finished=True, state="stopped"))
    assert [r["tasks"] for r in stopped] == ["4.25 / 9.87", "–"]
