"""Call-graph sessions (issue 23) in real Locust runs against `llmload mock`: the mock's log shows
every call after all of its parents ended, a fan-out's calls really overlapping, the affinity header
on every call, and the report's task makespans matching the rows."""

from __future__ import annotations

import json
import re

from llmload.report import ReportOptions, build_report, parse_slo, write_report
from tests.support.locust_runs import run_scenario

FAN_OUT = """
seed: 11
workloads:
  research:
    output_tokens: 12
    ignore_eos: true
    session:
      kind: graph
      affinity_header: x-session-id
      calls:
        - {id: plan, new_tokens: 40}
        - {id: a, after: [plan], context: fresh, new_tokens: 30, wait_s: 0.05}
        - {id: b, after: [plan], context: fresh, new_tokens: 30, wait_s: 0.05}
        - {id: c, after: [plan], context: fresh, new_tokens: 30, wait_s: 0.05}
        - {id: answer, after: [plan, a, b, c], new_tokens: 10}
    slo: {task_p95_s: 10}
"""


def test_a_fan_out_runs_in_parallel_and_the_join_waits_for_every_branch(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "60", "--itl-ms", "10", "--seed", "2")
    rows, out, prefix = run_scenario(tmp_path, mock, FAN_OUT, "graph", "-u", "3", "-r", "3", "-t", "6s",
                                     "--stop-timeout", "20")
    assert (rows["status"] == "ok").all(), rows["status"].value_counts().to_dict()
    log = mock.log_by_id(expect=len(rows))
    assert set(rows["request_id"]) == set(log)
    assert (rows["prompt_tokens"] == rows["requested_input_tokens"]).all()  # the mock counts what the client built
    sessions = rows.groupby("session_id")
    assert len(sessions) >= 3
    overlapped = 0
    for sid, g in sessions:
        calls = {r.call_id: log[r.request_id] for r in g.itertuples()}
        after = {r.call_id: str(r.call_after) if isinstance(r.call_after, str) else "" for r in g.itertuples()}
        for cid, entry in calls.items():
            assert entry["session"] == sid  # the affinity header, on every call
            for parent in filter(None, after[cid].split("+")):
                if parent in calls:  # the server saw the child only once its parent's last token was sent
                    assert entry["arrival_mono"] >= calls[parent]["last_token_mono"], (sid, cid, parent)
        if {"a", "b", "c"} <= set(calls):
            spans = [(calls[k]["arrival_mono"], calls[k]["last_token_mono"]) for k in "abc"]
            overlapped += max(s for s, _ in spans) < min(e for _, e in spans)  # all three at once
        if "answer" in calls:
            assert after["answer"] == "plan+a+b+c" and set(calls) == {"plan", "a", "b", "c", "answer"}
    assert overlapped >= 3
    answers = rows[rows["call_id"] == "answer"]
    plans = rows.set_index("session_id")
    for r in answers.itertuples():  # the join's prompt holds the plan's conversation and every branch's reply
        assert r.prompt_tokens > plans.loc[r.session_id].query("call_id == 'plan'")["prompt_tokens"].iloc[0] + 12 * 4
    report = build_report(str(prefix), ReportOptions(slos=[parse_slo("session_p95_s=10")], warmup_s=0))
    write_report(report, str(tmp_path / "rep"))
    tasks = json.loads((tmp_path / "rep" / "report.json").read_text())["tasks"]["research"]
    whole = sessions.filter(lambda g: "answer" in set(g["call_id"])).groupby("session_id")
    assert tasks["tasks"] >= len(whole) and tasks["outcomes"]["failed"] == 0
    makespans = whole.apply(lambda g: (g["start_time"] + g["e2e_ms"] / 1000).max() - g["start_time"].min())
    assert abs(tasks["task_s"]["p50"] - float(makespans.median())) < 0.05
    graph = json.loads((tmp_path / "rep" / "report.json").read_text())["sessions"]["research"]
    assert graph["sessions"] == len(whole) and graph["calls_per_session"] == 5.0
    assert abs(graph["makespan_s"]["p50"] - float(makespans.median())) < 0.01
    assert graph["critical_path_calls"] == 3.0  # plan, the branch that ended last, answer
    assert 0.5 < graph["critical_path_model_share"] < 1.0  # the rest is the 50-ms tool waits
    assert "## Call-graph sessions" in (tmp_path / "rep" / "report.md").read_text()
    assert "tasks (" in out


CHAIN = """
seed: 12
workloads:
  chain:
    output_tokens: 12
    ignore_eos: true
    system_prompt: "{system}"
    session:
      kind: graph
      calls:
        - {{id: plan, new_tokens: 40}}
        - {{id: step, after: [plan], new_tokens: 30}}
        - {{id: answer, after: [step], new_tokens: 10}}
"""


def test_a_call_graph_on_a_fresh_mock_is_not_warned_of_the_cache_hits_it_makes_itself(mock_factory, tmp_path):
    """Issue 32, item 2: a graph whose calls carry their parent's context (and a system prompt every
    call sends) was warned "the server answered 58% of the prompt tokens from its prefix cache, though
    this workload shares no prefix" on a mock started fresh. What the workload resends by design is
    in each row (resent_input_tokens); the summary holds the server's cached share to it."""
    mock = mock_factory()  # the default profile caches prefixes, as vLLM does
    system = " ".join(f"rule{i}" for i in range(300))
    rows, out, _prefix = run_scenario(tmp_path, mock, CHAIN.format(system=system), "chain", "-u", "3", "-r", "3",
                                      "-t", "5s", "--stop-timeout", "20")
    ok = rows[rows["status"] == "ok"]
    assert (ok["resent_input_tokens"] < ok["requested_input_tokens"]).all()
    plan = ok[ok["call_id"] == "plan"]
    assert (plan["resent_input_tokens"] == 300).all()  # the system prompt: every call sends it
    later = ok[ok["call_id"] != "plan"]
    assert (later["resent_input_tokens"] > 300 + 40).all()  # the parent's prompt and reply, sent again
    cached = ok["cached_tokens"].fillna(0).sum() / ok["prompt_tokens"].sum()
    resent = ok["resent_input_tokens"].sum() / ok["requested_input_tokens"].sum()
    assert 0.5 < cached <= resent, (cached, resent)  # the cache serves what the graph resends, no more
    line = next(x for x in out.splitlines() if x.startswith("chain: ") and "prefix-cache" in x)
    assert "WARNING" not in line and "shares no prefix" not in out, line
    said = re.search(r"at most (\d\.\d{3}) expected from the scenario", line)
    assert said and abs(float(said.group(1)) - resent) < 0.002, line
