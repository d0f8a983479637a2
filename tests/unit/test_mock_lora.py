"""The mock's LoRA slots: a request for an adapter that is not loaded waits for a free slot or an idle
adapter (the least recently used idle one is evicted); the base model needs none; /v1/models, the 404
body and vLLM's vllm:lora_requests_info gauge."""

from __future__ import annotations

import argparse
import json

import gevent
import pytest

from llmload.mock.front.lora import LoraConfig, LoraSlots, parse_adapters, wait_for_adapter


def test_an_adapter_waits_for_an_idle_slot_and_the_least_recently_used_idle_one_is_evicted():
    slots = LoraSlots(LoraConfig(("a", "b", "c"), max_loras=2, load_ms=0), "base")
    assert slots.acquire("base") is None  # no slot for the base model
    assert slots.acquire("a") == "a" and slots.acquire("b") == "b" and slots.acquire("a") == "a"
    waiter = gevent.spawn(slots.acquire, "c")
    gevent.sleep(0)
    assert not waiter.ready() and slots.waiting == {"c": 1}  # both slots run requests
    assert 'waiting_lora_adapters="c",running_lora_adapters="a,b"} 5.0' in slots.metrics_text(now=5.0)
    slots.release("b")  # b idle, and used less recently than a: evicted
    assert waiter.get(timeout=10) == "c"
    assert list(slots.loaded) == ["a", "c"] and slots.loads == 3 and slots.waiting == {}
    slots.release("a")
    slots.release("a")
    slots.release("c")
    assert slots.acquire("b") == "b" and list(slots.loaded) == ["c", "b"]  # a was the least recent idle one


def test_requests_for_an_adapter_being_loaded_wait_for_that_one_load():
    slots = LoraSlots(LoraConfig(("a",), max_loras=1, load_ms=1), "base")
    first, second = gevent.spawn(slots.acquire, "a"), gevent.spawn(slots.acquire, "a")
    assert first.get(timeout=10) == "a" and second.get(timeout=10) == "a"
    assert slots.loads == 1 and slots.loaded == {"a": 2}


def test_models_list_404_and_adapter_names():
    slots = LoraSlots(LoraConfig(parse_adapters("2")), "base")
    cards = json.loads(slots.models_body(4096))["data"]
    assert [(c["id"], c["parent"], c["max_model_len"]) for c in cards] == [
        ("base", None, 4096), ("adapter-1", "base", None), ("adapter-2", "base", None)]
    assert slots.serves("adapter-2") and slots.serves("base") and not slots.serves("adapter-3")
    body = json.loads(slots.not_found_body("x"))
    assert body == {"error": {"message": "The model `x` does not exist.", "type": "NotFoundError", "param": None,
                              "code": 404}}
    assert parse_adapters("a, b") == ("a", "b")
    for bad in ("0", "a,,b", "a,a"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_adapters(bad)


def test_a_request_waiting_for_its_adapter_is_waiting_to_the_engine_and_its_wait_is_queue_time():
    from time import perf_counter

    from llmload.mock.engine.batching_engine import BatchingEngine
    from llmload.mock.engine.engine_base import EngineParams, EngineRequest
    from llmload.mock.engine.priority_engine import sheds, waiting_priorities

    engine = BatchingEngine(EngineParams(step_base_ms=10.0, step_per_seq_ms=0.0, step_per_prefill_token_ms=0.0,
                                         prefix_caching=False))
    slots = LoraSlots(LoraConfig(("a", "b"), max_loras=1, load_ms=0), "base")
    assert slots.acquire("a") == "a"  # a runs a request: b must wait for the slot
    t0 = perf_counter()
    waiter = gevent.spawn(wait_for_adapter, slots, "b", 5, engine)
    gevent.sleep(0.05)
    assert not waiter.ready() and engine.num_waiting == 1 and waiting_priorities(engine) == [5]
    assert sheds(waiting_priorities(engine), priority=5, max_queue=1, policy="priority")  # it is ahead of the next
    released = perf_counter()
    slots.release("a")
    adapter, queued_at = waiter.get(timeout=10)
    assert adapter == "b" and engine.num_waiting == 0 and engine.held == [] and queued_at - t0 < 0.04
    seq = engine.submit(EngineRequest(prompt_words=["w"] * 10, output_tokens=1), queued_at)
    now = perf_counter()
    while not seq.finished:
        now = max(now, engine.next_event_time())
        engine.advance(now)
    # the engine's TTFT and queue time run from before the adapter wait (its whole wait, then a 10-ms
    # step), as vLLM's do; measured from when the waiter queued, not from t0 (a busy machine starts it late)
    waited = released - queued_at
    assert waited > 0.0 and seq.first_token_time - seq.arrival >= waited + 0.01 and engine.stats.ttft.count == 1
    assert engine.stats.queue.count == 1 and engine.stats.queue.sum >= waited
    assert wait_for_adapter(None, "x", 0, engine)[0] is None
