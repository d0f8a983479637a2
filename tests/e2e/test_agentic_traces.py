"""Agentic traces (issue 23) replayed against `llmload mock`, one test per format's sample: every call
reaches the server only after each of its parents sent its last token, a join after all of its
branches, each root at its session's trace time, each child its recorded gap after its last parent
ended, the session id in the affinity header of every call, a schedule lag no scheduling bug makes (the
5-ms target is a timing figure: benchmarks/trace_lag.py measures it on a quiet machine), and the
report's session makespans match the mock's log."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from llmload.report import ReportOptions, build_report, write_report
from llmload.workload.trace.read import load_trace, select
from tests.support.locust_runs import run_scenario
from tests.support.processes import raise_priority

LAG_BOUND_MS = 50.0
SAMPLES = Path(__file__).resolve().parents[2] / "scenarios" / "data" / "traces"
SCENARIO = """
seed: 5
workloads:
  agent:
    ignore_eos: true
    trace: {{path: {path}, format: {fmt}, time_scale: {scale}, loop: {loop}, affinity_header: x-session-id}}
"""
CASES = {  # format: (sample, time scale, loop, users, the joins of the sample: (session, call) -> parents)
    # looped so the lag's p99 is a percentile (220 and 120 calls) that one stall of a loaded machine
    # (a few calls at once) does not make, not the slowest call
    "weka": ("weka_sample.jsonl", 0.5, 20, 6, {("sess-a", "r5"): "r4+a2.1+a3.0"}),
    "otel": ("otel_sample.jsonl", 0.5, 20, 6, {("trace-research", "c3"): "c1+c2"}),
    "sglang": ("sglang_agentic_sample.json", 1.0, 1, 2, {}),  # no times: nothing to loop over
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_an_agentic_trace_replays_its_sessions_with_their_dependencies(fmt, mock_factory, tmp_path):
    sample, scale, loop, users, joins = CASES[fmt]
    path = SAMPLES / sample
    entries = select(load_trace(str(path), fmt).requests, time_scale=scale, loop=loop)
    graphs, seen = {}, Counter()
    for r in entries:  # a repeat's session id: ~N, N its repeat (as the replay names it)
        seen[r.session_id] += 1
        graphs[r.session_id if seen[r.session_id] == 1 else f"{r.session_id}~{seen[r.session_id]}"] = r
    calls = sum(len(r.graph.calls) for r in entries)
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "2", "--seed", "2")
    raise_priority(mock.proc.pid)  # the schedule lag is the client's: neither process may wait for a core
    text = SCENARIO.format(path=path, fmt=fmt, scale=scale, loop=loop)
    rows, out, prefix = run_scenario(tmp_path, mock, text, fmt, "-u", str(users), "-r", "10", "-t", "90s",
                                     "--stop-timeout", "20", boosted=True)
    assert len(rows) == calls and (rows["status"] == "ok").all(), rows["status"].value_counts().to_dict()
    log = mock.log_by_id(expect=len(rows))
    assert set(rows["request_id"]) == set(log)
    assert set(rows["session_id"]) == set(graphs)
    assert (rows["prompt_tokens"] == rows["requested_input_tokens"]).all()  # the mock counts what the client built
    roots = rows[rows["call_after"].isna()]
    t0 = min(r.scheduled_time - graphs[r.session_id].t - _call(graphs, r).wait_s * scale for r in roots.itertuples())
    for sid, g in rows.groupby("session_id"):
        by_call = {r.call_id: r for r in g.itertuples()}
        assert set(by_call) == {c.id for c in graphs[sid].graph.calls}
        for r in g.itertuples():
            assert log[r.request_id]["session"] == sid  # the affinity header, on every call
            call = _call(graphs, r)
            assert (r.call_after if isinstance(r.call_after, str) else "") == "+".join(call.after)
            if not call.after:  # a root: at its session's trace time, on the one trace clock
                assert abs(r.scheduled_time - (t0 + graphs[sid].t + call.wait_s * scale)) < 0.001, (sid, r.call_id)
                continue
            for p in call.after:  # the server saw the child only after its parent's last token
                assert log[r.request_id]["arrival_mono"] >= log[by_call[p].request_id]["last_token_mono"], (sid, p)
            last_end = max(by_call[p].start_time + by_call[p].e2e_ms / 1000 for p in call.after)
            gap = r.scheduled_time - last_end  # the recorded gap, from when the client saw the parent end
            assert call.wait_s * scale - 0.002 <= gap <= call.wait_s * scale + 0.25, (sid, r.call_id, gap)
    for (sid, cid), after in joins.items():
        join = rows[(rows["session_id"] == sid) & (rows["call_id"] == cid)]
        assert join["call_after"].iloc[0] == after
    lag_ms = (rows["start_time"] - rows["scheduled_time"]) * 1000
    late = rows.assign(lag_ms=lag_ms).nlargest(3, "lag_ms")[["session_id", "call_id", "lag_ms"]]
    if loop > 1:  # a replay scheduled by the trace's times (SGLang's has none: its calls only follow their parents)
        # p99 <= 5 ms is the target, measured by benchmarks/trace_lag.py (0.4-1.2 ms quiet); a loaded 2-core
        # machine makes 17-27 ms here, a clock or timer bug (a tick, a sleep) far more
        assert float(np.percentile(lag_ms, 99)) <= LAG_BOUND_MS, late.to_string()
    report = build_report(str(prefix), ReportOptions(warmup_s=0))
    write_report(report, str(tmp_path / "rep"))
    sessions = json.loads((tmp_path / "rep" / "report.json").read_text())["sessions"]["agent"]
    assert sessions["sessions"] == len(graphs) and sessions["calls_per_session"] == calls / len(graphs)
    by_id = rows.set_index("request_id")
    server = [max(log[i]["last_token_mono"] for i in ids) - min(log[i]["arrival_mono"] for i in ids)
              for ids in by_id.groupby("session_id").groups.values()]
    for q in ("p50", "p95"):  # the report's makespans are the server's
        assert abs(sessions["makespan_s"][q] - float(np.percentile(server, int(q[1:])))) < 0.02, (sessions, server)
    assert "every trace request is sent" in out


def _call(graphs, row):
    return next(c for c in graphs[row.session_id].graph.calls if c.id == row.call_id)
