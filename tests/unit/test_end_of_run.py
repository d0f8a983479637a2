"""What a headless run prints at its end says why it differs from the report, and says each thing once
(issue 25, items 7-9)."""

from __future__ import annotations

from llmload.health.run_verdict import ClientRun
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
    text = run_notes(ClientRun(2.0, ["a", "b"], {"machine": 2}), "")
    assert text.startswith("CLIENT-LIMITED: the machine the load generator runs on, not the server, limited the "
                           "run in 2 intervals of 2 s")
    both = run_notes(ClientRun(2.0, ["a", "b", "c"], {"process": 2, "calibrated": 1}), "")
    assert both.count("add worker processes") == 1


def test_percentiles_print_the_digits_the_histogram_supports():
    """28.665, 28.83 and 29.01 share one 2 % bucket: the table printed 28.79 three times, digits the
    histogram does not have (issue 32, item 12). Three significant digits, and the heading says why."""
    from llmload.metrics.histogram import Histogram

    h = Histogram()
    for tpot in [28.665] * 50 + [28.83] * 45 + [28.9] * 4 + [29.01] * 2:
        h.record(tpot)
    p50, p95, p99 = h.percentiles([50, 95, 99])
    assert f"{p50:.2f} {p95:.2f} {p99:.2f}" == "28.79 28.79 28.79"  # the line: one bucket
    tpot = catalog.BY_NAME["tpot"]
    values = zip(("p50", "p95", "p99"), (p50, p95, p99), strict=True)
    row = _row(scenario="chat", **{tpot.stats_column(st): v for st, v in values})
    text = format_summary([row])
    assert "28.79" not in text and "  28.8     28.8     28.8" in text, text
    assert "percentiles to 3 significant digits, each within 1 %" in text.splitlines()[0]
    e2e = catalog.BY_NAME["e2e"]
    assert "   3610   " in format_summary([_row(**{e2e.stats_column("p50"): 3611.0})])


def test_cache_hits_are_held_to_what_the_workload_shares_and_resends_by_design():
    """Issue 32, item 2: sessions, call graphs and agent loops resend their context by design; the
    warning of an unexplained cache is for hits above that share, not for any hit of a prefix-less workload."""
    def line(expected, **kw):
        row = _row(scenario="graph", cached_tokens=580, cache_hit_ratio=0.58, **kw)
        return format_summary([row], expected).splitlines()[-1]

    assert "WARNING" not in line({"graph": 0.0}, resent_input_share=0.62)
    assert "at most 0.620 expected from the scenario" in line({"graph": 0.0}, resent_input_share=0.62)
    assert "WARNING" not in line({}, resent_input_share=0.45)  # a session: no prefix ratio, what it resends
    warned = line({"graph": 0.0}, resent_input_share=0.3)
    assert warned.startswith("graph: WARNING: the server answered 58% of the prompt tokens from its prefix cache, "
                             "more than the 30% its shared prefixes and what it resends by design"), warned
    assert "shares no prefix and resends nothing" in line({"graph": 0.0}, resent_input_share=0.0)
    assert "WARNING" not in line({"graph": 0.25}, resent_input_share=0.2)  # prefixes and context together
    assert "WARNING" not in line({}, resent_input_share=0.0)  # a dataset's prompts may repeat: no estimate
