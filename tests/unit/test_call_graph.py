"""Call-graph sessions (issue 23), the pure parts: the graph's order and checks, the critical path,
the presets' graphs, the YAML section and each call's request."""

from __future__ import annotations

import random
import re
import textwrap

import pytest

from llmload.workload.file.scenario import ScenarioError, load_scenario
from llmload.workload.tasks.call_graph import CallGraph, GraphCall, GraphError, check_graph, critical_path, sample_graph
from llmload.workload.tasks.graph_session import CallResult, GraphSession
from llmload.workload.text import TextSource

pytestmark = pytest.mark.unit


def call(cid: str, *after: str, context: str = "parent") -> GraphCall:
    return GraphCall(cid, after, context if after else "fresh", 10, 8, 0.0)


def test_calls_come_in_an_order_where_each_follows_every_call_it_waits_for():
    g = check_graph([call("join", "a", "b"), call("a", "plan"), call("plan"), call("b", "plan", context="fresh")])
    order = [c.id for c in g.calls]
    assert order.index("plan") < order.index("a") < order.index("join")
    assert order.index("b") < order.index("join")
    assert {c.id for c in g.ready(done=set(), started=set())} == {"plan"}
    assert {c.id for c in g.ready(done={"plan"}, started={"plan"})} == {"a", "b"}  # the fan-out
    assert [c.id for c in g.ready(done={"plan", "a"}, started={"plan", "a", "b"})] == []  # the join waits for b
    assert g.children()["plan"] == ["a", "b"] or sorted(g.children()["plan"]) == ["a", "b"]


@pytest.mark.parametrize(("calls", "said"), [
    ([call("a"), call("a")], "'a': the id is used twice"),
    ([call("a", "ghost")], "waits for 'ghost', which is not a call"),
    ([call("a", "b"), call("b", "a")], "cycle"),
    ([GraphCall("a", (), "parent", 1, None, 0.0)], "context parent needs a call in after"),
    ([], "at least one call"),
])
def test_a_graph_that_cannot_run_is_refused_naming_the_call(calls, said):
    with pytest.raises(GraphError, match=said):
        check_graph(calls)


def test_the_critical_path_is_the_longest_chain_of_waits_and_calls():
    g = check_graph([call("plan"), call("a", "plan"), call("b", "plan"), call("join", "a", "b")])
    seconds, path = critical_path(g, {"plan": 1.0, "a": 2.0, "b": 0.5, "join": 1.0}, {"b": 3.0})
    assert path == ["plan", "b", "join"] and seconds == pytest.approx(1.0 + 3.0 + 0.5 + 1.0)
    seconds, path = critical_path(g, {"plan": 1.0, "a": 2.0, "b": 0.5, "join": 1.0}, {})
    assert path == ["plan", "a", "join"] and seconds == pytest.approx(4.0)


SCENARIO = """
workloads:
  agents:
    output_tokens: 16
    session:
      kind: graph
      affinity_header: x-session-id
      think_time_s: 0.5
      calls:
        - {id: plan, new_tokens: 30}
        - {id: a, after: [plan], context: fresh, new_tokens: 20, wait_s: 0.1}
        - {id: b, after: plan, context: fresh, new_tokens: 20-40, wait_s: 0.1}
        - {id: answer, after: [plan, a, b], new_tokens: 5, output_tokens: 4}
  coder:
    session: {kind: graph, preset: coding-agent, turns: 3-5, fanout_p: 1.0, fanout_width: 2}
"""


def scenario(tmp_path, text: str):
    p = tmp_path / "s.yaml"
    p.write_text(textwrap.dedent(text))
    return load_scenario(str(p))


def test_a_scenario_declares_a_graph_or_a_preset(tmp_path):
    spec = {w.name: w for w in scenario(tmp_path, SCENARIO).workloads}
    g = spec["agents"].graph
    assert [c.id for c in g.calls] == ["plan", "a", "b", "answer"] and g.affinity_header == "x-session-id"
    assert g.calls[2].after == ("plan",) and g.calls[1].context == "fresh" and g.calls[3].context == "parent"
    coder = spec["coder"].graph.preset
    assert coder.name == "coding-agent" and coder.fanout_p == 1.0 and coder.shared_context_tokens == 6000


@pytest.mark.parametrize(("session", "said"), [
    ("{kind: graph}", "either calls: (a list of calls) or preset:"),
    ("{kind: graph, preset: chatty}", "preset: expected coding-agent or research-agent"),
    ("{kind: graph, preset: coding-agent, fanout_p: 2}", "fanout_p: expected a probability"),
    ("{kind: graph, calls: [{id: a, after: [b]}]}", "waits for 'b', which is not a call"),
    ("{kind: graph, calls: [{id: a}], turns: 3}", "is a preset's setting"),
    ("{kind: graph, calls: [{id: a+b}]}", "expected a name without '+'"),
    ("{kind: graph, calls: [{id: a, context: sideways}]}", "context: expected parent or fresh"),
])
def test_a_bad_graph_section_names_the_key(tmp_path, session, said):
    with pytest.raises(ScenarioError, match=re.escape(said)) as e:
        scenario(tmp_path, f"workloads:\n  w:\n    session: {session}\n")
    assert "workloads.w.session" in str(e.value)


def test_a_presets_sessions_differ_and_fan_out_then_join(tmp_path):
    coder = {w.name: w for w in scenario(tmp_path, SCENARIO).workloads}["coder"].graph
    rng = random.Random(3)
    graphs = [sample_graph(coder, rng) for _ in range(20)]
    assert len({len(g.calls) for g in graphs}) > 1  # drawn per session
    for g in graphs:
        main = [c for c in g.calls if "s" not in c.id]
        assert 3 <= len(main) <= 5 and main[0].context == "fresh"
        for c in g.calls:
            if "s" in c.id:  # a sub-agent: fresh, after the turn that spawned it, joined by the next turn
                assert c.context == "fresh" and c.fresh_task
                assert any(c.id in m.after for m in main)


def test_each_call_carries_its_parents_real_replies(tmp_path):
    spec = {w.name: w for w in scenario(tmp_path, SCENARIO).workloads}["agents"]
    session = GraphSession(spec, user_seed=1, model="m", text=TextSource(1))
    graph, think = session.start()
    assert think == 0.0  # none before a user's first session
    by = graph.by_id()
    plan = session.request(by["plan"], {}, 1)
    assert plan.headers == {"x-session-id": session.session_id} and plan.call_id == "plan" and plan.call_after == ""
    results = {"plan": CallResult(tuple(plan.messages), "PLAN-REPLY", True)}
    a = session.request(by["a"], results, 2)
    assert a.messages[-1]["content"].startswith("task: ") and "PLAN-REPLY" not in str(a.messages)  # fresh
    results["a"] = CallResult(tuple(a.messages), "A-REPLY", True)
    results["b"] = CallResult((), "B-REPLY", True)
    answer = session.request(by["answer"], results, 4)
    assert answer.messages[:len(plan.messages)] == plan.messages  # the plan's conversation, as it was sent
    assert answer.messages[len(plan.messages)] == {"role": "assistant", "content": "PLAN-REPLY"}
    assert "[a] A-REPLY" in answer.messages[-3]["content"] and "[b] B-REPLY" in answer.messages[-2]["content"]
    assert answer.messages[-1]["content"].startswith("tool result: ")
    assert answer.call_after == "plan+a+b" and answer.max_tokens == 4 and answer.step_kind == "graph"
    words = sum(len(str(m["content"]).split()) for m in answer.messages)
    assert answer.input_tokens == words  # what the mock counts


def test_the_shared_context_is_the_same_text_in_every_process(tmp_path):
    coder = {w.name: w for w in scenario(tmp_path, SCENARIO).workloads}["coder"]
    heads = []
    for worker in (0, 1):  # each process has its own prompt text, the same shared text
        s = GraphSession(coder, user_seed=worker, model="m", text=TextSource(100 + worker), shared_text=TextSource(7))
        graph, _ = s.start()
        heads.append(s.request(graph.calls[0], {}, 1).messages[0]["content"])
    assert heads[0] == heads[1] and len(heads[0].split()) == 1500 + 6000


def test_graph_columns_come_after_every_earlier_requests_column():
    from llmload.files import REQUESTS_COLUMNS
    i = REQUESTS_COLUMNS.index("call_id")
    assert REQUESTS_COLUMNS[i + 1] == "call_after" and REQUESTS_COLUMNS.index("backoff_ms") == i - 1  # appended
    assert CallGraph(()).calls == ()


def test_the_reports_critical_path_steps_back_to_the_parent_that_ended_last():
    import pandas as pd

    from llmload.report.sections.sessions import critical_path as rows_critical_path
    calls = pd.DataFrame({
        "call_id": ["plan", "a", "b", "answer"], "call_after": ["", "plan", "plan", "plan+a+b"],
        "start_time": [0.0, 1.2, 1.2, 4.3], "end_time": [1.0, 2.0, 4.0, 5.0], "e2e_ms": [1000, 800, 2800, 700]})
    makespan, on_path, n = rows_critical_path(calls)
    assert makespan == 5.0 and n == 3 and on_path == pytest.approx(1.0 + 2.8 + 0.7)  # plan, b, answer


def test_a_session_slo_is_the_task_time_slo():
    from llmload.metrics.slo import parse_slo
    slo = parse_slo("research:session_p95_s=30")
    assert slo.metric == "task_p95_s" and slo.per_task and slo.scenario == "research"


def test_prefix_hit_rate_sizes_the_shared_prefix_for_the_intended_share(tmp_path):
    spec = scenario(tmp_path, """
workloads:
  rag:
    input_tokens: 200
    prefix_hit_rate: 0.6
    prefix: {groups: [{name: docs, count: 8}, {name: faq, count: 2, weight: 0.5}]}
  plain:
    input_tokens: 100
    prefix_hit_rate: 0.5
""")
    rag, plain = spec.workloads
    assert [g.tokens for g in rag.prefix_groups] == [304, 304]  # 0.6 / 0.4 x 200 = 300, in whole 16-token blocks
    assert [g.count for g in rag.prefix_groups] == [8, 2] and rag.intended_hit_rate == 0.6
    assert rag.expected_prefix_hit_ratio() == 0.6
    assert [(g.name, g.tokens, g.count) for g in plain.prefix_groups] == [("shared", 96, 1)]


@pytest.mark.parametrize(("body", "said"), [
    ("input_tokens: 100\n    prefix_hit_rate: 1", "expected a share of prompt tokens 0..1 (below 1)"),
    ("prefix_hit_rate: 0.5\n    prefix: {tokens: 300}", "workloads.w.prefix.tokens: is set by prefix_hit_rate"),
    ("prefix_hit_rate: 0.5\n    session: {kind: agent}", "prefix_hit_rate: does not go with an agent session"),
])
def test_a_bad_prefix_hit_rate_names_the_key(tmp_path, body, said):
    with pytest.raises(ScenarioError, match=re.escape(said)):
        scenario(tmp_path, f"workloads:\n  w:\n    {body}\n")


def test_a_primed_pool_sends_every_prefix_once_before_drawing_by_popularity(tmp_path):
    from llmload.workload.scenario_workload import PrefixPool
    spec = scenario(tmp_path, """
workloads:
  rag:
    input_tokens: 100
    prefix_hit_rate: 0.5
    prefix: {prime: true, groups: [{name: a, count: 3, popularity: zipf}, {name: b, count: 2}]}
  single:
    prefix: {tokens: 64, count: 2, prime: true}
""")
    rag, single = spec.workloads
    assert rag.prefix_prime and single.prefix_prime and single.prefix_groups[0].count == 2
    pool = PrefixPool(rag.prefix_groups, 1, "rag", prime=True)
    rng = random.Random(0)
    first = [(g.name, i) for g, i, _ in (pool.pick(rng) for _ in range(5))]
    assert sorted(first) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]  # each once
    later = {(g.name, i) for g, i, _ in (pool.pick(rng) for _ in range(200))}
    assert ("a", 0) in later  # then by popularity
    with pytest.raises(ScenarioError, match=re.escape("workloads.w.prefix.prime: expected true or false")):
        scenario(tmp_path, "workloads:\n  w:\n    prefix: {tokens: 64, prime: 3}\n")


def test_a_call_says_what_of_its_prompt_was_sent_before(tmp_path):
    """Issue 32, item 2: a fresh call resends the shared head, a parent call its first parent's turn
    (prompt and reply); the other parents' replies and the new input are new."""
    spec = {w.name: w for w in scenario(tmp_path, SCENARIO).workloads}["agents"]
    session = GraphSession(spec, user_seed=1, model="m", text=TextSource(1))
    graph, _ = session.start()
    by = graph.by_id()
    plan = session.request(by["plan"], {}, 1)
    head = sum(len(str(m["content"]).split()) for m in plan.messages[:-1])
    assert plan.resent_tokens == head
    results = {"plan": CallResult(tuple(plan.messages), "PLAN REPLY", True),
               "a": CallResult((), "A-REPLY", True), "b": CallResult((), "B-REPLY", True)}
    answer = session.request(by["answer"], results, 4)
    assert answer.resent_tokens == plan.input_tokens + 2
