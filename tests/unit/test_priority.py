"""Priority classes: the scenario's ``priority:`` key, and the mock's priority policy on a fake clock
(the queue's order, preemption with recompute, shedding at a bounded queue)."""

from __future__ import annotations

import argparse
import json

import pytest

from llmload.mock.api.messages_api import parse_messages_body
from llmload.mock.api.openai_api import BadRequest, parse_body
from llmload.mock.api.responses_api import parse_responses_body
from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, EngineRequest
from llmload.mock.engine.priority_engine import PriorityEngine, make_engine, pick_victim, sheds, waiting_priorities
from llmload.mock.options import add_mock_arguments, config_from_args
from llmload.workload.file.scenario import ScenarioError, parse_scenario
from tests.support.engine_runs import run_until_idle, words

# Two slots, a step of 10 ms plus 1 ms per sequence: every timing below is exact on the fake clock
PARAMS = EngineParams(max_num_seqs=2, max_num_batched_tokens=512, kv_capacity_tokens=100_000,
                      step_base_ms=10.0, step_per_seq_ms=1.0, step_per_prefill_token_ms=0.0,
                      prefix_caching=False, chunked_prefill=True)
ONE_SLOT = EngineParams(max_num_seqs=1, max_num_batched_tokens=512, kv_capacity_tokens=100_000, step_base_ms=10.0,
                        step_per_seq_ms=0.0, step_per_prefill_token_ms=1.0, prefix_caching=False)


def _scenario(priority: str, extra: str = "") -> str:
    return f"workloads:\n  w:\n    input_tokens: 10\n    priority: {priority}\n{extra}"


# -- the scenario's priority: --------------------------------------------------------------------
def test_body_priority_goes_into_the_body_and_names_the_class():
    w = parse_scenario(_scenario("{class: interactive, value: 0}")).workloads[0]
    assert w.priority.name == "interactive" and w.priority.rank == 0
    assert w.extra == {"priority": 0} and w.headers == ()


def test_header_priority_goes_into_a_header_and_keeps_the_body_clean():
    w = parse_scenario(_scenario("{class: batch, header: x-gateway-inference-objective, value: batch-obj, "
                                 "rank: 5}")).workloads[0]
    assert w.priority.name == "batch" and w.priority.rank == 5
    assert w.headers == (("x-gateway-inference-objective", "batch-obj"),) and "priority" not in w.extra


def test_a_plain_name_is_a_class_without_a_value():
    w = parse_scenario(_scenario("bulk")).workloads[0]
    assert w.priority.name == "bulk" and w.priority.value is None and w.extra == {} and w.headers == ()


def test_defaults_give_every_workload_the_class():
    spec = parse_scenario("defaults: {priority: {class: low, value: 3}}\nworkloads:\n  a: {}\n  b: {}\n")
    assert [(w.priority.name, w.extra) for w in spec.workloads] == [("low", {"priority": 3})] * 2


@pytest.mark.parametrize("priority, extra, message", [
    ("{class: x, value: high}", "", r"s.yaml:4: workloads.w.priority.value: expected a whole number .*header: NAME"),
    ("{class: x, value: true}", "", r"workloads.w.priority.value: expected a whole number"),
    ("{class: x, header: x-obj}", "", r"workloads.w.priority.value: missing: the value to send in the x-obj header"),
    ("{class: x, header: 'bad name', value: 1}", "", r"workloads.w.priority.header: expected a header name"),
    ("{class: 'a b', value: 1}", "", r"workloads.w.priority.class: expected a class name"),
    ("{value: 1}", "", r"workloads.w.priority.class: expected a class name"),
    ("{class: x, valeu: 1}", "", r"workloads.w.priority.valeu: unknown key; did you mean value\?"),
    ("{class: x, value: 1}", "    extra: {priority: 2}\n", r"workloads.w.extra.priority: is set by priority:"),
    ("{class: x, header: x-obj, value: a}", "    headers: {X-Obj: b}\n", r"workloads.w.headers.x-obj: is set by"),
])
def test_bad_priority_gets_one_message_naming_the_key(priority, extra, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(_scenario(priority, extra), "s.yaml")


def test_the_mock_reads_the_body_priority_and_rejects_a_non_integer():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "priority": -3}
    assert parse_body(json.dumps(body).encode(), True, "m").priority == -3
    assert parse_body(json.dumps({**body, "priority": None}).encode(), True, "m").priority == 0
    with pytest.raises(BadRequest, match="priority: expected an integer"):
        parse_body(json.dumps({**body, "priority": "high"}).encode(), True, "m")


def test_mock_options_choose_the_policy_and_refuse_it_without_a_batching_engine():
    p = argparse.ArgumentParser()
    add_mock_arguments(p)
    config = config_from_args(p.parse_args(["--scheduling", "priority", "--max-queue", "8"]))
    assert config.scheduling == "priority" and config.max_queue == 8
    assert config_from_args(p.parse_args([])).scheduling == "fcfs"
    with pytest.raises(ValueError, match="--scheduling priority: profile 'fixed' has no batching engine"):
        config_from_args(p.parse_args(["--profile", "fixed", "--scheduling", "priority"]))
    with pytest.raises(ValueError, match=r"^--max-queue 8: profile 'fixed' has no batching engine to schedule; pick"):
        config_from_args(p.parse_args(["--profile", "fixed", "--ttft-ms", "20", "--max-queue", "8"]))
    assert isinstance(make_engine(PARAMS, "priority"), PriorityEngine)
    assert type(make_engine(PARAMS, "fcfs")) is BatchingEngine


# -- the policy ------------------------------------------------------------------------------------
def _req(priority: int, tag: str, out: int = 4, prompt: int = 10) -> EngineRequest:
    return EngineRequest(prompt_words=words(prompt, tag), output_tokens=out, priority=priority)


def test_the_waiting_queue_is_served_by_priority_then_arrival():
    e = PriorityEngine(ONE_SLOT)
    busy = e.submit(_req(0, "busy"), now=0.0)
    e.advance(0.0)  # the slot is taken by the most urgent class: nothing can preempt it
    late = [e.submit(_req(p, f"q{i}"), now=0.001 * (i + 1)) for i, p in enumerate((5, 1, 5, 1))]
    run_until_idle(e)
    assert busy.state == "finished" and all(s.state == "finished" for s in late) and e.stats.preemptions == 0
    served = sorted(late, key=lambda s: s.first_token_time)
    assert served == [late[1], late[3], late[0], late[2]]  # priority 1 before 5; within a class, arrival order


def test_fcfs_serves_arrival_order_whatever_the_priority():
    e = BatchingEngine(ONE_SLOT)
    e.submit(_req(0, "busy"), now=0.0)
    e.advance(0.0)
    late = [e.submit(_req(p, f"q{i}"), now=0.001 * (i + 1)) for i, p in enumerate((5, 1, 5, 1))]
    run_until_idle(e)
    assert sorted(late, key=lambda s: s.first_token_time) == late


def test_a_more_urgent_arrival_preempts_the_least_urgent_latest_running_request():
    e = PriorityEngine(PARAMS)
    low_old = e.submit(_req(5, "lo-old", out=20), now=0.0)
    low_new = e.submit(_req(5, "lo-new", out=20), now=0.0005)
    e.advance(0.001)
    assert e.num_running == 2
    run_until = e.next_event_time()
    e.advance(run_until)  # the first step: both produced their first token
    urgent = e.submit(_req(0, "hi", out=3), now=run_until)
    run_until_idle(e, now=run_until)
    assert e.stats.preemptions == 1
    # the victim is vLLM's: max (priority, arrival), the later of the two low ones
    assert urgent.first_token_time < low_new.last_token_time
    assert all(s.state == "finished" and s.generated == s.request.output_tokens for s in (low_old, low_new, urgent))
    assert e.kv_used == 0 and e.num_waiting == 0


def test_a_preempted_request_resumes_by_recompute():
    e = PriorityEngine(ONE_SLOT)
    low = e.submit(_req(9, "lo", out=6, prompt=10), now=0.0)
    t = 0.0
    while low.generated < 3:  # its prefill (10 + 10 x 1 ms), then decodes of 10 ms
        t = e.next_event_time()
        e.advance(t)
    hi = e.submit(_req(0, "hi", out=1, prompt=10), now=t)  # while low's 4th token is being computed
    t = e.next_event_time()
    ems = e.advance(t)  # that step ends; the next one preempts low for hi
    assert [(em.seq, em.generated) for em in ems] == [(low, 4)]
    assert low.state == "waiting" and low.kv_reserved == 0 and hi.state == "running" and e.stats.preemptions == 1
    t_hi = e.next_event_time()
    e.advance(t_hi)
    assert hi.finished and t_hi == pytest.approx(t + 0.020)  # hi's own prefill: 10 + 10 x 1 ms
    # back in, low prefills its prompt and its 4 tokens again (10 + 14 x 1 ms) before its 5th token
    t_back = e.next_event_time()
    assert [(em.seq, em.generated) for em in e.advance(t_back)] == [(low, 5)]
    assert t_back - t_hi == pytest.approx(0.024)
    run_until_idle(e, now=t_back)
    assert low.generated == 6 and low.state == "finished" and e.stats.preemptions == 1
    assert e.stats.ttft.count == 2  # the resumed request's first token was counted once


def test_requests_of_one_class_never_preempt_each_other():
    e = PriorityEngine(PARAMS)
    for i in range(2):
        e.submit(_req(3, f"a{i}", out=10), now=0.0)
    e.advance(0.0)
    e.submit(_req(3, "b", out=2), now=0.001)
    run_until_idle(e)
    assert e.stats.preemptions == 0


def test_pick_victim_takes_vllms_victim_and_only_a_less_urgent_one():
    e = PriorityEngine(PARAMS)
    a, b = e.submit(_req(2, "a"), now=0.0), e.submit(_req(2, "b"), now=0.1)
    c = e.submit(_req(7, "c"), now=0.05)
    arrival = e.submit(_req(1, "x"), now=0.2)
    assert pick_victim([a, b, c], arrival) is c
    assert pick_victim([a, b], arrival) is b
    assert pick_victim([a, b], e.submit(_req(2, "y"), now=0.3)) is None
    assert pick_victim([], arrival) is None


def test_shedding_turns_the_least_urgent_class_away_first():
    waiting = [0, 0, 5, 5, 5, 5]
    assert not sheds(waiting, priority=0, max_queue=4, policy="priority")  # 2 ahead of an urgent one
    assert sheds(waiting, priority=5, max_queue=4, policy="priority")  # 6 ahead of a batch one
    assert sheds(waiting, priority=0, max_queue=4, policy="fcfs")  # fcfs: every waiting one is ahead
    assert not sheds(waiting, priority=9, max_queue=None, policy="priority")  # unbounded
    e = PriorityEngine(PARAMS)
    e.submit(_req(4, "a"), now=0.0)
    assert waiting_priorities(e) == [4] and waiting_priorities(object()) == []


def test_no_request_is_preempted_when_all_the_less_urgent_ones_would_not_make_room():
    # KV 1000: a p=0 request holds 600, two p=5 hold 150 each; a p=1 arrival needs 600. Preempting
    # both p=5 ones frees 300 of the 400 missing: none is preempted, and they keep their progress.
    e = PriorityEngine(EngineParams(max_num_seqs=8, max_num_batched_tokens=2048, kv_capacity_tokens=1000,
                                    step_base_ms=10.0, step_per_seq_ms=0.0, step_per_prefill_token_ms=0.0,
                                    prefix_caching=False))
    big = e.submit(_req(0, "big", out=50, prompt=550), now=0.0)
    lows = [e.submit(_req(5, f"lo{i}", out=50, prompt=100), now=0.0) for i in range(2)]
    e.advance(0.0)
    t = e.next_event_time()
    e.advance(t)  # every one produced its first token
    assert e.num_running == 3 and e.kv_used == 900
    urgent = e.submit(_req(1, "hi", out=10, prompt=590), now=t)
    e.advance(e.next_event_time())
    assert e.stats.preemptions == 0 and urgent.state == "waiting"
    assert all(s.state == "running" and s.generated == 2 for s in lows)
    run_until_idle(e, now=t)
    assert all(s.state == "finished" for s in (big, urgent, *lows)) and e.stats.preemptions == 0


def test_preemption_stops_as_soon_as_the_head_fits():
    # the same batch, an arrival needing 250: one p=5 victim (150 freed) is enough, the other keeps running
    e = PriorityEngine(EngineParams(max_num_seqs=8, max_num_batched_tokens=2048, kv_capacity_tokens=1000,
                                    step_base_ms=10.0, step_per_seq_ms=0.0, step_per_prefill_token_ms=0.0,
                                    prefix_caching=False))
    e.submit(_req(0, "big", out=50, prompt=550), now=0.0)
    lows = [e.submit(_req(5, f"lo{i}", out=50, prompt=100), now=0.0) for i in range(2)]
    e.advance(0.0)
    t = e.next_event_time()
    e.advance(t)
    urgent = e.submit(_req(1, "hi", out=10, prompt=240), now=t)
    e.advance(e.next_event_time())
    assert e.stats.preemptions == 1 and urgent.state == "running"
    assert [s.state for s in lows] == ["running", "waiting"]  # vLLM's victim: the later one


@pytest.mark.parametrize("parse, body", [
    (parse_responses_body, {"model": "m", "input": "hi there"}),
    (parse_messages_body, {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
])
def test_the_responses_and_messages_apis_read_the_body_priority_as_chat_does(parse, body):
    assert parse(json.dumps({**body, "priority": 7}).encode(), "m").priority == 7
    assert parse(json.dumps(body).encode(), "m").priority == 0
    with pytest.raises(BadRequest, match="priority: expected an integer"):
        parse(json.dumps({**body, "priority": "high"}).encode(), "m")
