"""`--trace-context` (issue 22): every request carries a valid W3C `traceparent`, its trace id is in
the row, and the server (the mock's log) saw the same id; without the flag no header is sent."""

from __future__ import annotations

import re

from tests.support.locust_runs import CHAT, load_rows, run_locust

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def test_every_request_carries_its_own_traceparent_and_the_row_its_trace_id(fixed_mock, tmp_path):
    prefix = tmp_path / "traced"
    res = run_locust(["-f", CHAT, "--host", fixed_mock.url, "--headless", "-u", "3", "-r", "3", "-t", "3s",
                      "--csv", str(prefix), "--stop-timeout", "10", "--output-tokens", "8", "--trace-context"],
                     tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    log = fixed_mock.log_by_id(expect=len(rows))
    assert len(rows) >= 10 and set(rows["request_id"]) == set(log)
    for r in rows.itertuples():
        m = TRACEPARENT.match(log[r.request_id]["traceparent"])
        assert m and m.group(1) == r.trace_id and m.group(1) != "0" * 32 and m.group(2) != "0" * 16
    assert rows["trace_id"].nunique() == len(rows)  # a trace per request


def test_without_the_flag_no_trace_header_goes_out(fixed_mock, tmp_path):
    prefix = tmp_path / "plain"
    res = run_locust(["-f", CHAT, "--host", fixed_mock.url, "--headless", "-u", "2", "-r", "2", "-t", "2s",
                      "--csv", str(prefix), "--stop-timeout", "10", "--output-tokens", "8"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    log = fixed_mock.log_by_id(expect=len(rows))
    assert rows["trace_id"].isna().all() and not any("traceparent" in e for e in log.values())
