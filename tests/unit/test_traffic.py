"""Production-shaped workloads, client side: the trace/images/agent/response_format sections, trace
schedules and prompts, agent tasks, tool calls from the stream, task and schedule-lag stats, the
task SLO and the report's task table."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from llmload.metrics.agent_tasks import TaskRecord, TaskStats, TaskTracker, outcome_of
from llmload.metrics.record import RequestMeta, RequestRecord, StreamAccumulator
from llmload.metrics.scenario_stats import ScenarioStats
from llmload.metrics.slo import parse_slo, task_limit_s
from llmload.metrics.stats import LLMStats
from llmload.mock.api.openai_api import parse_body
from llmload.plugin.output.end_of_run import format_summary
from llmload.report.sections.traffic import task_stats, task_table
from llmload.wire.chunks import classify, classify_event
from llmload.wire.tool_calls import assemble
from llmload.workload.file.scenario import ScenarioError, parse_scenario
from llmload.workload.file.spec import TraceSpec
from llmload.workload.images import ImageSet
from llmload.workload.tasks.agent import AgentWorkload, prompt_words, synthetic_tools
from llmload.workload.text import TextSource
from llmload.workload.trace.read import TraceRequest
from llmload.workload.trace.replay import SelectedTrace, TraceSchedule, TraceWorkload, selected_trace
from tests.support import recorded_streams as rs
from tests.support.processes import ROOT

SAMPLES = f"{ROOT}/scenarios/data/traces"


def scenario(text: str, tmp_path=None):
    return parse_scenario(text, "s.yaml", str(tmp_path) if tmp_path else SAMPLES)


# ---- scenario sections ------------------------------------------------------------------------

def test_sections_parse():
    spec = scenario("""
seed: 3
workloads:
  t: {trace: {path: mooncake_sample.jsonl, time_scale: 0.5, start: 2, duration: 30, limit: 50, loop: 2}}
  v: {images: {count: 2, size: 640x480, format: jpeg}, response_format: {type: json_object}}
  a:
    session: {kind: agent, max_steps: 3, tools: 2, tool_choice: {type: function, function: {name: read_file}},
              tool_result_tokens: 50, tool_latency_s: 0.1}
    slo: {task_p95_s: 20}
""")
    t, v, a = spec.workloads
    assert t.trace == TraceSpec(f"{SAMPLES}/mooncake_sample.jsonl", None, 0.5, 2.0, 30.0, 50, 2)
    assert t.input_tokens is None and t.output_tokens is None
    assert (v.images.count, v.images.width, v.images.height, v.images.format) == (2, 640, 480, "jpeg")
    assert v.response_format == {"type": "json_object"}
    assert a.agent.max_steps == 3 and [x["function"]["name"] for x in a.agent.tools] == ["search_docs", "read_file"]
    assert a.agent.tool_choice == {"type": "function", "function": {"name": "read_file"}} and a.session is None
    assert a.slos[0].metric == "task_p95_s" and a.slos[0].scenario == "a"


@pytest.mark.parametrize("body,msg", [
    ("t: {trace: {path: nope.jsonl}}", r"s.yaml:3: workloads.t.trace.path: no such file"),
    ("t: {trace: {path: mooncake_sample.jsonl, format: csv}}", r"trace.format: expected mooncake or azure"),
    ("t: {trace: {path: mooncake_sample.jsonl, time_scale: 0}}", r"trace.time_scale: expected a number > 0"),
    ("t: {trace: mooncake_sample.jsonl, input_tokens: 5}", r"workloads.t.input_tokens: does not go with trace"),
    ("t: {trace: {path: mooncake_sample.jsonl, lop: 2}}", r"trace.lop: unknown key; did you mean loop"),
    ("v: {images: {size: 512}}", r"images.size: expected WIDTHxHEIGHT"),
    ("v: {images: {size: 9000x10}}", r"images.size: expected sides of 1..8192"),
    ("v: {images: {count: 1}, endpoint: completions}", r"images: image content parts need the chat endpoint"),
    ("a: {session: {kind: agent, tools: 0}}", r"session.tools: expected 1..64 generated tools"),
    ("a: {session: {kind: agent, tools: [{name: x}]}}", r"session.tools\[0\]: expected \{type: function"),
    ("a: {session: {kind: agent, tool_choice: sometimes}}", r"tool_choice: expected auto, required, none"),
    ("a: {session: {kind: agent, tool_choice: {type: function, function: {name: zzz}}}}", r"naming one of the tools"),
    ("a: {session: {kind: agent}, arrival: {rate: 2}}", r"open-loop arrivals and multi-turn sessions do not mix"),
    ("a: {session: {kind: chat, max_steps: 3}}", r"session.max_steps: unknown key"),
    ("a: {session: {kind: agent}, prefix: {tokens: 100}}", r"a.prefix: does not go with an agent session"),
    ("r: {response_format: {type: xml}}", r"response_format.type: expected json_schema or json_object or text"),
    ("r: {response_format: {type: json_schema}}", r"response_format.json_schema: expected \{name"),
    ("r: {slo: {task_p95_ms: 3}}", r"slo.task_p95_ms: unknown metric"),
])
def test_section_errors_name_file_line_and_key(body, msg):
    with pytest.raises(ScenarioError, match=msg):
        scenario(f"seed: 1\nworkloads:\n  {body}\n")


def test_task_slo_grammar():
    slo = parse_slo("agent:task_p95_s=30")
    assert (slo.name, slo.quantile, slo.column, slo.per_task) == ("task", 95.0, None, True)
    assert not parse_slo("ttft_p95_ms=3").per_task
    slos = [slo, parse_slo("task_p99_s=60"), parse_slo("task_mean_s=10")]
    assert task_limit_s(slos, "agent") == 10.0 and task_limit_s(slos, "other") == 10.0
    assert task_limit_s([parse_slo("ttft_p95_ms=3")], "agent") is None


# ---- trace replay -------------------------------------------------------------------------------

def test_schedule_shares_tile_the_trace_and_report_done():
    trace = selected_trace(TraceSpec(f"{SAMPLES}/plain_sample.jsonl", time_scale=0.5))
    done = []
    shares = [TraceSchedule(trace, i, 3, t0=1000.0, on_done=lambda i=i: done.append(i)) for i in range(3)]
    taken = []
    for s in shares:
        while (ticket := s.take()) is not None:
            taken.append(ticket)
            assert not s.done
            s.finished()
        assert s.done
    assert done == [0, 1, 2]
    assert sorted(due for _, due in taken) == pytest.approx(sorted(1000.0 + r.t for r in trace.requests))
    sessions = {}
    for i, s in enumerate(shares):
        for r in s.share:
            if r.session_id:
                assert sessions.setdefault(r.session_id, i) == i  # a session stays on one process
    # empty share: done at the first look, once
    one = SelectedTrace(trace.spec, trace.requests[:1], span_s=0.0)
    fired = []
    idle = TraceSchedule(one, 1, 2, 0.0, on_done=lambda: fired.append(1))
    assert idle.take() is None and idle.take() is None and fired == [1]


def test_trace_prompts_share_blocks_and_have_exact_lengths():
    spec = scenario("seed: 4\nworkloads:\n  t: {trace: mooncake_sample.jsonl, ignore_eos: true}\n").workloads[0]
    a = TraceWorkload(spec, 4, user_seed=1, model="m", text=TextSource(1))
    b = TraceWorkload(spec, 4, user_seed=2, model="m", text=TextSource(2))  # another user, another process
    r1 = TraceRequest(0.0, 1300, 7, (0, 7, 8))
    r2 = TraceRequest(1.0, 1100, 9, (0, 7, 9))
    q1, q2 = a.request_for(r1, rate=3.0), b.request_for(r2)
    w1, w2 = q1.messages[-1]["content"].split(), q2.messages[-1]["content"].split()
    assert len(w1) == 1300 and len(w2) == 1100 and w1[:1024] == w2[:1024] and w1[1024:1100] != w2[1024:1100]
    assert q1.max_tokens == 7 and q1.extra["ignore_eos"] is True and q1.input_tokens == 1300
    # ids that stop short: the tail is request-unique text; no ids: all unique
    short = a.request_for(TraceRequest(0.0, 600, 1, (0,))).messages[-1]["content"].split()
    assert short[:512] == w1[:512] and len(short) == 600 and short[512] not in w1
    plain = a.request_for(TraceRequest(0.0, 50, 1)).messages[-1]["content"].split()
    assert len(plain) == 50 and plain[0].startswith("r1n")
    # plain traces' prefix_id: one shared block
    p1 = a.request_for(TraceRequest(0.0, 700, 1, (), "", "docs")).messages[-1]["content"].split()
    p2 = b.request_for(TraceRequest(0.0, 300, 1, (), "", "docs")).messages[-1]["content"].split()
    assert p1[:300] == p2 and len(p1) == 700


def test_expected_hit_ratio_of_a_trace():
    spec = TraceSpec("x", block_tokens=512)
    reqs = [TraceRequest(0.0, 1024, 1, (1, 2)), TraceRequest(1.0, 1536, 1, (1, 2, 3)), TraceRequest(2.0, 100, 1, (9,))]
    # second request: blocks 1 and 2 seen (1024 tokens) of 1536; third: nothing
    assert SelectedTrace(spec, reqs, span_s=2.0).expected_hit_ratio() == pytest.approx(1024 / (1024 + 1536 + 100))
    assert SelectedTrace(spec, reqs, span_s=2.0).rate == 1.0


# ---- agent tasks --------------------------------------------------------------------------------

AGENT = """
seed: 2
workloads:
  a:
    system_prompt: "be brief"
    input_tokens: 30
    output_tokens: 16
    ignore_eos: true
    response_format: {type: json_object}
    images: {count: 1, size: 224x224}
    session: {kind: agent, max_steps: 3, tools: 2, tool_result_tokens: 40, tool_latency_s: 0.25, think_time_s: 2}
"""


def test_agent_task_loop_and_the_mocks_prompt_count():
    spec = scenario(AGENT).workloads[0]
    images = ImageSet(1, 224, 224, "png", 2, seed=1)
    agent = AgentWorkload(spec, user_seed=9, model="m", text=TextSource(1), images=images)
    req = agent.start_task()
    assert (req.turn, req.step_kind, req.wait_s, req.want_text, req.image_tokens) == (1, "task", 0.0, True, 64)
    assert req.extra["tools"] == list(spec.agent.tools) and req.extra["tool_choice"] == "auto"
    assert req.extra["response_format"] == {"type": "json_object"} and req.extra["ignore_eos"]
    call = {"id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": '{"query": "x y"}'}}
    nxt = agent.next_call(req, ok=True, text="", tool_calls=[call, {**call, "id": "call_8"}])
    assert (nxt.turn, nxt.step_kind, nxt.wait_s, nxt.session_id) == (2, "tool_result", 0.25, req.session_id)
    assert nxt.messages[-3] == {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "call_8"}]}
    assert [m["role"] for m in nxt.messages[-2:]] == ["tool", "tool"] and nxt.messages[-1]["tool_call_id"] == "call_8"
    assert len(nxt.messages[-1]["content"].split()) == 40
    # the mock counts tools, tool calls and tool results as the client does; the picture apart
    for r in (req, nxt):
        parsed = parse_body(json.dumps(r.body()).encode(), True, "m")
        assert len(parsed.prompt_words) == r.input_tokens + 64 and parsed.image_tokens == 64
        assert r.input_tokens == prompt_words(r.messages, spec.agent.tools)
    last = agent.next_call(nxt, True, "", [call])
    assert last.turn == 3 and agent.next_call(last, True, "", [call]) is None  # max_steps
    assert agent.next_call(nxt, False, "", [call]) is None  # failed call
    second = agent.start_task()
    assert second.session_id != req.session_id and second.wait_s == 2.0 and second.turn == 1


def test_tools_are_the_same_everywhere():
    assert synthetic_tools(3) == synthetic_tools(3)
    names = [t["function"]["name"] for t in synthetic_tools(14)]
    assert len(set(names)) == 14 and names[12] == "search_docs_1"


# ---- tool calls from the stream ---------------------------------------------------------------

def test_tool_calls_are_assembled_from_the_stream_when_asked():
    rec = run_stream(rs.OPENAI_TOOL_CALLS, want_text=True)
    assert rec.tool_calls == [{"id": "call_1", "type": "function", "function": {"name": "get", "arguments": '{"a":1}'}}]
    assert run_stream(rs.OPENAI_TOOL_CALLS).tool_calls == []  # kept only with want_text
    # classify hands the pieces over (the byte fast path never takes a tool-call delta)
    payload = (b'{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1"}}]},'
               b'"logprobs":null,"finish_reason":null}]}')
    for want in (False, True):
        ch = classify(payload, want)
        assert ch.output and not ch.visible and ch.tool_calls == [{"index": 0, "function": {"arguments": "1"}}]


def run_stream(body: bytes, want_text: bool = False) -> RequestRecord:
    from llmload.wire.sse import SSEDecoder

    acc = StreamAccumulator(0.0, want_text)
    d = SSEDecoder()
    for i, ev in enumerate(d.feed(body) + d.flush()):
        acc.add(classify_event(ev, want_text), 0.01 * (i + 1))
    return acc.finish(RequestMeta("r", 1.0, "s"), "complete", 1.0)


def test_assemble_tool_call_pieces():
    pieces = [
        {"index": 1, "id": "b", "type": "function", "function": {"name": "second"}},
        {"index": 0, "id": "a", "type": "function", "function": {"name": "fir"}},
        {"index": 0, "function": {"name": "st", "arguments": '{"q": '}},
        {"index": 0, "id": "ignored-later-id", "function": {"arguments": '"x"}'}},
        {"index": 1, "function": {"arguments": {"k": 1}}},
        "junk",
    ]
    assert assemble(pieces) == [
        {"id": "a", "type": "function", "function": {"name": "first", "arguments": '{"q": "x"}'}},
        {"id": "b", "type": "function", "function": {"name": "second", "arguments": '{"k": 1}'}}]
    whole = [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}, {"function": {"arguments": ""}},
             {"id": "c2", "function": {"name": "g", "arguments": "{}"}}]
    assert [c["id"] for c in assemble(whole)] == ["c1", "c2"]


# ---- task and schedule stats ------------------------------------------------------------------

def rec(start: float, e2e_ms: float, prompt: int, completion: int, status="ok", tool_calls=()) -> RequestRecord:
    return RequestRecord(RequestMeta("r", start, "agent"), status, e2e_ms=e2e_ms, prompt_tokens=prompt,
                         completion_tokens=completion, tool_calls=list(tool_calls))


def test_task_tracker_outcomes_and_stats_across_processes():
    t = TaskTracker("agent", "a-1")
    t.add(rec(100.0, 500, 200, 10, tool_calls=[{"id": "x"}]))
    t.add(rec(100.8, 700, 450, 20))
    task = t.finish("answered")
    assert (task.duration_s, task.calls, task.prompt_tokens, task.completion_tokens) == (pytest.approx(1.5), 2, 650, 30)
    assert outcome_of(rec(0, 1, 1, 1, tool_calls=[{}]), 2, 3) is None
    assert outcome_of(rec(0, 1, 1, 1, tool_calls=[{}]), 3, 3) == "step_limit"
    assert outcome_of(rec(0, 1, 1, 1), 1, 3) == "answered" and outcome_of(rec(0, 1, 1, 1, "timeout"), 1, 3) == "failed"
    with pytest.raises(ValueError, match="task outcome"):
        t.finish("done")
    worker, master = LLMStats(), LLMStats()
    for i, (d, outcome) in enumerate([(1.0, "answered"), (2.0, "answered"), (9.0, "step_limit"), (0.5, "failed")]):
        worker.add_task(TaskRecord("agent", f"t{i}", 0.0, d, 2, 100, 10, outcome), limit_s=5.0, track_delta=True)
    master.merge_wire(worker.take_delta())
    row = master.rows()[0]
    assert (row["tasks"], row["tasks_answered"], row["tasks_step_limit"], row["tasks_failed"]) == (4, 2, 1, 1)
    assert row["tasks_within_slo"] == 0.5  # 1 s and 2 s; not 9 s, not the failed one
    assert row["p99_task_s"] == pytest.approx(9.0, rel=0.01) and row["calls_per_task"] == 2.0
    assert row["prompt_tokens_per_task"] == 100.0
    assert TaskStats().summary()["tasks"] == 0 and ScenarioStats().summary()["mean_task_s"] is None
    text = format_summary(master.rows())
    assert "agent: 4 tasks (2 answered, 1 at the step limit, 1 failed)" in text
    assert "50.0% of tasks finished within the task SLO" in text


def test_schedule_lag_is_counted_and_reported():
    s = LLMStats()
    for i, lag in enumerate([0.0002, 0.0004, 0.003, 0.030]):
        meta = RequestMeta(f"r{i}", 100.0 + i + lag, "trace", scheduled_time=100.0 + i, requested_input_tokens=10,
                           requested_image_tokens=5)
        s.add(RequestRecord(meta, "ok", e2e_ms=5.0, prompt_tokens=15))
    s.add(RequestRecord(RequestMeta("x", 1.0, "trace"), "ok", e2e_ms=1.0))  # closed loop: no lag
    wire = LLMStats()
    wire.merge_wire({"trace": s.scenarios["trace"].to_wire()})
    row = wire.rows()[0]
    assert row["scheduled_requests"] == 4 and row["late_requests"] == 1
    assert row["max_schedule_lag_ms"] == pytest.approx(30.0, abs=0.01)
    assert row["requested_input_tokens_mean"] == 10 and row["requested_image_tokens_mean"] == 5
    text = format_summary(wire.rows())
    assert "BEHIND SCHEDULE: trace: 1 of 4 requests were sent more than 10 ms after" in text
    assert "input tokens requested 10.0 text + 5.0 image vs server-reported 15.0" in text
    on_time = LLMStats()
    on_time.add(RequestRecord(RequestMeta("r", 5.0001, "t", scheduled_time=5.0), "ok", e2e_ms=1.0))
    assert "t: every one of 1 scheduled requests sent within 10 ms" in format_summary(on_time.rows())


def test_report_task_table_from_rows():
    rows = pd.DataFrame({
        "session_id": ["a", "a", "a", "b", "c", "c", "d", "e", "e"],
        "turn": [1, 2, 3, 1, 1, 2, 1, 1, 2],
        "step_kind": ["task", "tool_result", "tool_result", "task", "task", "tool_result", "task", "task",
                      "tool_result"],
        "status": ["ok", "ok", "ok", "ok", "ok", "timeout", "ok", "ok", "cancelled"],
        "finish_reason": ["tool_calls", "tool_calls", "stop", "stop", "tool_calls", "", "tool_calls", "tool_calls",
                          ""],
        "start_time": [0.0, 1.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0],
        "end_time": [0.5, 1.5, 3.0, 0.4, 0.5, 9.0, 0.7, 0.5, 1.2],
        "prompt_tokens": [10, 20, 30, 5, 10, None, 8, 1, None],
        "completion_tokens": [1, 1, 4, 2, 1, 0, 3, 1, 0],
    })
    rows["ok"] = rows["status"] == "ok"
    tasks = task_table(rows)
    assert set(tasks.index) == {"a", "b", "c", "d"}  # e was cut off by the end of the test
    a = tasks.loc["a"]
    assert a["duration_s"] == 3.0 and a["calls"] == 3 and a["prompt_tokens"] == 60
    assert dict(tasks["outcome"]) == {"a": "answered", "b": "answered", "c": "failed", "d": "step_limit"}
    stats = task_stats(rows, [parse_slo("task_p50_s=1")])
    assert stats["outcomes"] == {"answered": 2, "step_limit": 1, "failed": 1}
    assert stats["slo"]["task_p50_s"]["value"] == 0.7 and stats["slo"]["task_p50_s"]["met"]
    assert stats["slo"]["task_p50_s"]["share_within"] == 0.5  # b and d of four


def test_image_set_is_deterministic_and_priced_like_qwen2_vl():
    a, b = ImageSet(2, 224, 224, "png", 3, seed=5), ImageSet(2, 224, 224, "png", 3, seed=5)
    assert a.tokens == 2 * 64
    pa, pb = a.parts(random.Random(1)), b.parts(random.Random(1))
    assert pa == pb and len(pa) == 2 and pa[0]["image_url"]["url"].startswith("data:image/png;base64,")
    urls = {p["image_url"]["url"] for p in a.parts(random.Random(2)) + a.parts(random.Random(3)) * 5}
    assert len(urls) <= 3


def test_each_agent_call_says_what_of_its_prompt_was_sent_before():
    """Issue 32, item 2: the tools and the system prompt go with every call; a call after tool results
    resends the whole loop so far, its reply included: only the tool results are new."""
    spec = scenario(AGENT).workloads[0]
    agent = AgentWorkload(spec, user_seed=9, model="m", text=TextSource(1))
    req = agent.start_task()
    system = len(agent.system.split()) if agent.system else 0
    assert req.resent_tokens == prompt_words([], spec.agent.tools) + system
    call = {"id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": '{"query": "x y"}'}}
    nxt = agent.next_call(req, ok=True, text="", tool_calls=[call])
    assert nxt.resent_tokens == req.input_tokens + 4  # the reply's tool call: its name and two argument words
    assert nxt.input_tokens - nxt.resent_tokens == len(nxt.messages[-1]["content"].split())
