"""Agentic traces as call-graph sessions (issue 23): each reader on its shipped sample (the calls,
their parents, lengths and times), the format rules each project's loader applies, every
malformed-input message, and the requests a replayed call becomes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmload.workload.file.scenario import ScenarioError, parse_scenario
from llmload.workload.tasks.graph_session import CallResult
from llmload.workload.text import TextSource
from llmload.workload.trace.read import TraceError, load_trace, select
from llmload.workload.trace.replay import SelectedTrace, TraceWorkload, selected_trace
from llmload.workload.trace.weka import read_weka

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "scenarios", "data", "traces")


def calls_of(entry) -> dict:
    return {c.id: c for c in entry.graph.calls}


def sessions(name: str, fmt: str | None = None) -> dict:
    trace = load_trace(os.path.join(DATA, name), fmt)
    return {r.session_id: r for r in trace.requests}


def test_weka_sample_sub_agents_fan_out_from_the_last_call_and_join_at_the_first_call_after_their_end():
    got = sessions("weka_sample.jsonl")
    assert list(got) == ["sess-a", "sess-b"]
    a, b = got["sess-a"], got["sess-b"]
    assert (a.t, b.t) == (0.0, 0.8)  # sessions at their recorded times, on one clock
    c = calls_of(a)
    assert {k: v.after for k, v in c.items()} == {
        "r0": (), "r1": ("r0",), "r4": ("r1",), "a2.0": ("r1",), "a3.0": ("r1",), "a2.1": ("a2.0",),
        # sub-agent 2 ends at 1.1 + 0.9 s, sub-agent 3 at 1.6: r4 (t 1.3) joins neither, r5 (t 2.2) both
        "r5": ("r4", "a2.1", "a3.0")}
    assert [(c[k].input_tokens, c[k].output_tokens) for k in ("r0", "a2.1", "r5")] == [(300, 16), (260, 12), (700, 24)]
    # the recorded gap from the last parent's end (t + api_time) to the start
    assert {k: round(v.wait_s, 6) for k, v in c.items()} == {
        "r0": 0.0, "r1": 0.2, "r4": 0.3, "a2.0": 0.2, "a3.0": 0.15, "a2.1": 0.1, "r5": 0.3}
    assert all(v.block_tokens == 64 and v.context == "fresh" and v.messages is None for v in c.values())
    # hash ids are the session's own: a prefix within a session, different text in the other
    assert c["r1"].hash_ids[:4] == c["r0"].hash_ids and c["r5"].hash_ids[:7] == c["r4"].hash_ids
    assert not set(c["r0"].hash_ids) & set(calls_of(b)["r0"].hash_ids)
    # an async_launched sub-agent runs beside the session and nothing waits for it
    cb = calls_of(b)
    assert {k: v.after for k, v in cb.items()} == {"r0": (), "r2": ("r0",), "a1.0": ("r0",), "r3": ("r2",)}
    assert (a.input_tokens, a.output_tokens) == (2520, 108)


def weka(requests, **top):
    return {"id": "s", "block_size": 16, "hash_id_scope": "local", "requests": requests, **top}


def call(t, n_in=10, n_out=2, **kw):
    return {"t": t, "type": "n", "model": "m", "in": n_in, "out": n_out, "hash_ids": [1], **kw}


def test_weka_relative_inner_times_and_an_unjoined_sub_agent():
    sub = {"t": 5.0, "type": "subagent", "agent_id": "x", "subagent_type": "Explore", "status": "completed",
           "duration_ms": 1000, "requests": [call(0.5, api_time=0.2)]}  # 0.5 s after the spawn (older captures)
    [entry] = read_weka(weka([call(4.0, api_time=0.5), sub, call(5.2)]), "w.json", 0)
    c = calls_of(entry)
    assert c["a1.0"].after == ("r0",) and c["a1.0"].wait_s == pytest.approx(5.5 - 4.5)
    assert c["r2"].after == ("r0",)  # 5.2 is before the sub-agent's end (6.0): no call joins it
    [first] = read_weka(weka([sub, call(7.0)]), "w.json", 0)  # a sub-agent before any call: a root
    c = calls_of(first)
    assert c["a0.0"].after == () and c["r1"].after == ("a0.0",) and c["a0.0"].wait_s == 0.0


@pytest.mark.parametrize("obj, message", [
    (weka([call(0)], block_size=0), r"w.json: block_size: expected a whole number >= 1"),
    (weka([call(0)], hash_id_scope="global"), r"hash_id_scope: only local"),
    (weka([]), r"w.json: requests: expected a non-empty list"),
    (weka([{**call(0), "type": "x"}]), r"requests\[0\].type: expected n or s"),
    (weka([{**call(0), "in": -3}]), r"requests\[0\].in: expected a whole number >= 0, got -3"),
    (weka([{k: v for k, v in call(0).items() if k != "out"}]), r"requests\[0\].out: missing"),
    (weka([{**call(0), "hash_ids": [1, "a"]}]), r"requests\[0\].hash_ids: expected a list of whole numbers"),
    (weka([{"t": 0, "type": "subagent", "requests": [{**call(1), "type": "subagent"}]}]),
     r"requests\[0\].requests\[0\].type: expected n or s \(an API call; a sub-agent cannot nest\)"),
    ({"block_size": 16, "requests": [call(0)]}, r"w.json: id: expected the session's id"),
])
def test_weka_errors_name_the_key(obj, message):
    with pytest.raises(TraceError, match=message):
        read_weka(obj, "w.json", 0)


def test_otel_sample_causal_edges_from_output_text_and_a_temporal_edge_otherwise():
    got = sessions("otel_sample.jsonl")
    assert list(got) == ["trace-research", "trace-chain"]
    r, chain = got["trace-research"], got["trace-chain"]
    assert (r.t, chain.t) == (0.0, 0.5)
    c = calls_of(r)
    # the tool span is not an LLM call; both branches hold the plan's output; the answer holds both
    # branches' outputs (the plan, their ancestor, is not a direct parent)
    assert {k: v.after for k, v in c.items()} == {"c0": (), "c1": ("c0",), "c2": ("c0",), "c3": ("c1", "c2")}
    assert {k: round(v.wait_s, 6) for k, v in c.items()} == {"c0": 0.0, "c1": 0.2, "c2": 0.2, "c3": 0.3}
    assert [c[k].output_tokens for k in ("c0", "c1", "c2", "c3")] == [12, 8, 12, 10]  # usage.completion_tokens
    assert c["c3"].messages[-1] == {"role": "user", "content": "Now answer."} and len(c["c3"].messages) == 6
    cc = calls_of(chain)  # no output matches: the closest call that had ended
    assert cc["c1"].after == ("c0",) and cc["c1"].wait_s == pytest.approx(0.4)


def span(sid, start, end, msgs, out=None, **attrs):
    a = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(msgs), **attrs}
    if out is not None:
        a["gen_ai.output.text"] = out
    return {"span_id": sid, "start_time": f"2026-01-01T00:00:0{start}Z", "end_time": f"2026-01-01T00:00:0{end}Z",
            "attributes": a}


def test_otel_rules_overlap_duplicates_and_lengths(tmp_path):
    u = [{"role": "user", "content": "q"}]
    spans = [span("a", 0, 2, u, "x" * 40), span("a", 0, 2, u, "x" * 40),  # the same span twice: once
             span("b", 1, 3, u, "y", **{"gen_ai.usage.output_tokens": 3}),  # overlaps a: no edge
             span("c", 4, 5, [*u, {"role": "assistant", "content": "x" * 40}], **{"gen_ai.request.max_tokens": 7}),
             {"span_id": "t", "name": "execute_tool", "attributes": {"gen_ai.operation.name": "execute_tool"}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"trace_id": "T", "spans": spans}, indent=2))  # pretty JSON: told from its keys
    [entry] = load_trace(str(p)).requests
    c = calls_of(entry)
    assert {k: v.after for k, v in c.items()} == {"c0": (), "c1": (), "c2": ("c0", "c1")}  # causal a, temporal b
    assert c["c1"].wait_s == pytest.approx(1.0)  # a root: from the trace's first call
    assert [c[k].output_tokens for k in ("c0", "c1", "c2")] == [10, 3, 7]  # 40 characters / 4; usage; max_tokens
    p.write_text(json.dumps({"spans": [span("a", 0, 1, u)], "trace_id": "T"}).replace('"gen_ai.input.messages"', '"x"'))
    with pytest.raises(TraceError, match=r"t.json: spans: expected at least one LLM span"):
        load_trace(str(p), "otel")
    p.write_text(json.dumps({"spans": [{**span("a", 0, 1, u), "start_time": "noon"}]}))
    with pytest.raises(TraceError, match=r"spans\[0\].start_time: expected an ISO 8601 time"):
        load_trace(str(p), "otel")


def test_sglang_sample_one_chain_per_conversation_on_the_live_replies():
    got = sessions("sglang_agentic_sample.json")
    assert list(got) == ["conv0", "conv1"] and all(r.t == 0.0 for r in got.values())  # no times in the format
    c = calls_of(got["conv0"])
    assert {k: (v.after, v.context) for k, v in c.items()} == {
        "t0": ((), "fresh"), "t1": (("t0",), "parent"), "t2": (("t1",), "parent")}
    assert all(v.output_tokens == 220 and v.wait_s == 0.0 for v in c.values())
    assert list(calls_of(got["conv1"])) == ["t0", "t2"]  # a turn without messages is skipped


def test_detection_and_format_errors(tmp_path):
    for name, fmt in (("weka_sample.jsonl", "weka"), ("otel_sample.jsonl", "otel"),
                      ("sglang_agentic_sample.json", "sglang")):
        assert load_trace(os.path.join(DATA, name)).format == fmt
    p = tmp_path / "x.json"
    p.write_text('{\n "sessions": []\n}\n')
    with pytest.raises(TraceError, match=r"x.json: cannot tell the agentic trace format from keys \['sessions'\]"):
        load_trace(str(p))
    p.write_text('{"spans": []}\n{"spans": \n')
    with pytest.raises(TraceError, match=r"x.json:2: not valid JSON"):
        load_trace(str(p), "otel")
    with pytest.raises(TraceError, match=r"models and log_types filter BurstGPT traces only"):
        load_trace(os.path.join(DATA, "weka_sample.jsonl"), models=["m"])


def test_a_folder_of_captures_one_session_a_file(tmp_path):
    lines = Path(DATA, "weka_sample.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        (tmp_path / f"{i}.json").write_text(json.dumps(json.loads(line), indent=2))
    (tmp_path / "notes.txt").write_text("not a trace")
    trace = load_trace(str(tmp_path))
    assert trace.format == "weka" and [r.session_id for r in trace.requests] == ["sess-a", "sess-b"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match=r"empty: no .json or .jsonl file in the folder"):
        load_trace(str(empty))


def test_select_keeps_the_sessions_and_scales_their_start():
    reqs = load_trace(os.path.join(DATA, "weka_sample.jsonl")).requests
    cut = select(reqs, time_scale=0.5, loop=2)
    assert [r.t for r in cut] == pytest.approx([0.0, 0.4, 0.8, 1.2])  # period: the span plus the mean gap
    assert all(r.graph is reqs[i % 2].graph for i, r in enumerate(cut))


def workload(fmt: str, sample: str, more: str = "") -> tuple[TraceWorkload, SelectedTrace]:
    text = f"seed: 4\nworkloads:\n  t: {{trace: {{path: {sample}, format: {fmt}{more}}}, ignore_eos: true}}\n"
    spec = parse_scenario(text, "s.yaml", DATA).workloads[0]
    return TraceWorkload(spec, 4, user_seed=1, model="m", text=TextSource(1)), selected_trace(spec.trace)


def test_a_weka_call_is_a_prompt_of_its_length_whose_blocks_its_children_share():
    source, trace = workload("weka", "weka_sample.jsonl", ", affinity_header: x-session-id")
    assert trace.sessions
    c = calls_of(trace.requests[0])
    q0 = source.call_request(c["r0"], {}, "sess-a", 1)
    q1 = source.call_request(c["r1"], {"r0": CallResult((), "reply", True)}, "sess-a", 2)
    w0, w1 = q0.messages[-1]["content"].split(), q1.messages[-1]["content"].split()
    assert (len(w0), len(w1)) == (300, 420) and w1[:256] == w0[:256] and w1[256:300] != w0[256:300]
    assert (q1.max_tokens, q1.input_tokens, q1.call_id, q1.call_after, q1.session_id) == (16, 420, "r1", "r0", "sess-a")
    assert q1.step_kind == "graph" and q1.extra["ignore_eos"] is True and q1.headers == {"x-session-id": "sess-a"}
    with pytest.raises(ScenarioError, match=r"trace.affinity_header: expected a header name like x-session-id"):
        workload("weka", "weka_sample.jsonl", ", affinity_header: 'a b'")
    assert 0.3 < trace.expected_hit_ratio() < 0.9  # later calls repeat the leading blocks of earlier ones


def test_otel_and_sglang_calls_send_recorded_messages_with_the_live_replies():
    source, trace = workload("otel", "otel_sample.jsonl")
    c = calls_of(trace.requests[0])
    # the assistant messages that are exactly an ancestor's output: the plan's (an ancestor, not a
    # parent) and both branches'; they go out as those calls' live replies, the rest as recorded
    assert c["c3"].replies == ((2, "c0"), (3, "c1"), (4, "c2")) and c["c1"].replies == ((2, "c0"),)
    live = {k: CallResult((), f"live {k}", True) for k in ("c0", "c1", "c2")}
    sent = source.call_request(c["c3"], live, "trace-research", 4).messages
    assert [m["content"] for m in sent[2:5]] == ["live c0", "live c1", "live c2"]
    assert sent[:2] + sent[5:] == [*c["c3"].messages[:2], *c["c3"].messages[5:]]
    assert c["c3"].messages[2]["content"].startswith("Plan:")  # the trace itself is left as it was
    assert calls_of(trace.requests[1])["c1"].replies == ()  # linked by time only: nothing to substitute
    source, trace = workload("sglang", "sglang_agentic_sample.json")
    c = calls_of(trace.requests[0])
    first = source.call_request(c["t0"], {}, "conv0", 1)
    done = {"t0": CallResult(tuple(first.messages), "the live reply", True)}
    second = source.call_request(c["t1"], done, "conv0", 2)
    assert second.messages == [*first.messages, {"role": "assistant", "content": "the live reply"}, *c["t1"].messages]
    assert second.max_tokens == 220 and second.call_after == "t0"
