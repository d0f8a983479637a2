"""What a headless run prints at its end says why it differs from the report, and says each thing once
(issue 25, items 7-9)."""

from __future__ import annotations

from llmload.metrics import catalog
from llmload.plugin.output.end_of_run import format_summary, run_notes


def _row(**kw):
    row = {"scenario": "Aggregated", "requests": 10, "ok": 8, "failures": 0, "rps": 1.0, "output_tps": 10.0}
    row.update({c: None for m in catalog.METRICS for c in m.stats_columns()})
    row.update(kw)
    return row


def test_the_summary_says_it_includes_the_warm_up():
    assert "warm-up included" in format_summary([_row()]).splitlines()[0]


def test_cancelled_requests_get_their_cause_and_the_flag():
    text = format_summary([_row(cancelled=2)])
    assert "by status: cancelled 2" in text and "--stop-timeout" in text
    assert "--stop-timeout" not in format_summary([_row()])


def test_a_busy_machine_is_named_as_such_and_advice_is_given_once():
    text = run_notes(["a", "b"], "", 2.0, {"machine": 2})
    assert text.startswith("CLIENT-LIMITED: the machine the load generator runs on, not the server, limited the "
                           "run in 2 intervals of 2 s")
    both = run_notes(["a", "b", "c"], "", 2.0, {"process": 2, "calibrated": 1})
    assert both.count("add worker processes") == 1 and "(3 intervals)" in both
