"""The simulated engine on a fake clock: batching, queueing, chunked prefill, prefix cache, faults."""

from __future__ import annotations

import pytest

from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, EngineRequest
from llmload.mock.engine.fixed_engine import FixedEngine
from llmload.mock.engine.prefix_cache import prompt_block_hashes
from llmload.mock.engine.simulate import closed_loop
from llmload.mock.front.faults import FaultPicker, parse_fault, parse_fault_rate
from llmload.mock.profiles import PROFILES
from tests.support.engine_runs import run_until_idle, words

PARAMS = EngineParams(max_num_seqs=4, max_num_batched_tokens=512, kv_capacity_tokens=100_000,
                      step_base_ms=10.0, step_per_seq_ms=1.0, step_per_prefill_token_ms=0.01,
                      prefix_caching=True, chunked_prefill=True)


def test_single_request_timing_follows_the_step_formula():
    e = BatchingEngine(PARAMS)
    seq = e.submit(EngineRequest(prompt_words=words(100), output_tokens=3), now=0.0)
    ems = run_until_idle(e)
    assert [em.first for em in ems] == [True, False, False]
    # prefill step: 10 + 1*1 + 100*0.01 = 12 ms; then decode steps of 10 + 1 = 11 ms
    assert ems[0].time == pytest.approx(0.012)
    assert ems[1].time == pytest.approx(0.023)
    assert ems[2].time == pytest.approx(0.034)
    assert ems[2].finished and seq.state == "finished"
    assert e.kv_used == 0


def test_batching_slows_each_step_by_the_per_sequence_cost():
    e = BatchingEngine(PARAMS)
    for i in range(4):
        e.submit(EngineRequest(prompt_words=words(10, f"p{i}"), output_tokens=5), now=0.0)
    ems = run_until_idle(e)
    decode_times = sorted({em.time for em in ems})
    gaps = [b - a for a, b in zip(decode_times[1:], decode_times[2:], strict=False)]
    assert len(gaps) == 3 and all(g == pytest.approx(0.014) for g in gaps)  # 10 + 4 seqs * 1 ms


def test_requests_queue_when_max_num_seqs_is_full():
    e = BatchingEngine(PARAMS)
    seqs = [e.submit(EngineRequest(prompt_words=words(10, f"p{i}"), output_tokens=4), now=0.0) for i in range(6)]
    e.advance(0.0)
    assert e.num_running == 4 and e.num_waiting == 2
    run_until_idle(e)
    # the two late ones get their first token only after the first four are done
    first_batch_end = max(s.last_token_time for s in seqs[:4])
    assert min(s.first_token_time for s in seqs[4:]) > first_batch_end


def test_requests_wait_when_the_kv_cache_is_full():
    params = EngineParams(max_num_seqs=64, max_num_batched_tokens=4096, kv_capacity_tokens=300,
                          step_base_ms=10, step_per_seq_ms=0, step_per_prefill_token_ms=0)
    e = BatchingEngine(params)
    a = e.submit(EngineRequest(prompt_words=words(100, "a"), output_tokens=100), now=0.0)  # 200 tokens
    b = e.submit(EngineRequest(prompt_words=words(100, "b"), output_tokens=100), now=0.0)  # does not fit
    e.advance(0.0)
    assert e.num_running == 1 and e.num_waiting == 1
    run_until_idle(e)
    assert b.first_token_time > a.last_token_time


def test_chunked_prefill_splits_a_long_prompt_over_steps_within_the_budget():
    e = BatchingEngine(PARAMS)  # budget 512 tokens per step
    seq = e.submit(EngineRequest(prompt_words=words(2000), output_tokens=2), now=0.0)
    e.advance(0.0)  # starts the first step
    steps = 0
    while seq.generated == 0:
        e.advance(e.next_event_time())
        steps += 1
        assert seq.prefilled <= 2000
    assert steps == 4  # 512 + 512 + 512 + 464
    # a decode that runs beside a prefill still gets its token every step
    e2 = BatchingEngine(PARAMS)
    short = e2.submit(EngineRequest(prompt_words=words(10, "s"), output_tokens=10), now=0.0)
    e2.advance(0.0)
    e2.advance(e2.next_event_time())  # short's first token
    e2.submit(EngineRequest(prompt_words=words(2000, "l"), output_tokens=2), now=e2._step_end or 0.0)
    before = short.generated
    for _ in range(3):
        e2.advance(e2.next_event_time())
    assert short.generated == before + 3


def test_prefix_cache_hit_skips_the_shared_prefill_and_reports_cached_tokens():
    params = EngineParams(max_num_seqs=8, max_num_batched_tokens=8192, kv_capacity_tokens=100_000,
                          step_base_ms=10, step_per_seq_ms=0.5, step_per_prefill_token_ms=0.05)
    system = words(2000, "sys")
    e = BatchingEngine(params)
    first = e.submit(EngineRequest(prompt_words=system + words(20, "q1"), output_tokens=2), now=0.0)
    run_until_idle(e)
    t = 10.0
    second = e.submit(EngineRequest(prompt_words=system + words(20, "q2"), output_tokens=2), now=t)
    run_until_idle(e, now=t)
    ttft1 = first.first_token_time - first.arrival
    ttft2 = second.first_token_time - second.arrival
    assert first.cached_tokens == 0
    assert second.cached_tokens == 2000  # 125 whole blocks of 16
    assert ttft2 < ttft1 / 5
    assert e.prefix_cache.hit_tokens == 2000
    # a different system prompt shares nothing
    third = e.submit(EngineRequest(prompt_words=words(2000, "other"), output_tokens=2), now=20.0)
    run_until_idle(e, now=20.0)
    assert third.cached_tokens == 0


def test_an_idle_engine_batches_requests_that_arrive_within_its_schedule_delay():
    params = EngineParams(max_num_seqs=8, step_base_ms=10, step_per_seq_ms=0, step_per_prefill_token_ms=0,
                          schedule_delay_ms=2.0)
    e = BatchingEngine(params)
    a = e.submit(EngineRequest(prompt_words=words(10, "a"), output_tokens=1), now=0.0)
    assert e.next_event_time() == pytest.approx(0.002)
    e.advance(0.001)  # too early: nothing starts
    b = e.submit(EngineRequest(prompt_words=words(10, "b"), output_tokens=1), now=0.0015)
    run_until_idle(e, now=0.0015)
    assert a.first_token_time == b.first_token_time == pytest.approx(0.012)  # one prefill step for both
    late = e.submit(EngineRequest(prompt_words=words(10, "c"), output_tokens=1), now=1.0)
    run_until_idle(e, now=1.0)
    assert late.first_token_time == pytest.approx(1.012)


def test_prefix_hash_covers_the_whole_prefix():
    a = prompt_block_hashes(words(32, "x"))
    b = prompt_block_hashes(["y"] + words(32, "x")[1:])
    assert len(a) == 2 and a[1] != b[1]  # same second block text, different first block
    assert prompt_block_hashes(words(15)) == []


def test_prefix_cache_is_lru_bounded():
    params = EngineParams(kv_capacity_tokens=16 * 10, max_num_seqs=2, max_num_batched_tokens=1000,
                          step_base_ms=1, step_per_seq_ms=0, step_per_prefill_token_ms=0)
    e = BatchingEngine(params)
    for i in range(5):
        e.submit(EngineRequest(prompt_words=words(64, f"g{i}"), output_tokens=1), now=float(i))
        run_until_idle(e, now=float(i))
    assert len(e.prefix_cache) == 10


def test_abort_frees_the_slot_at_once():
    e = BatchingEngine(EngineParams(max_num_seqs=1, step_base_ms=10, step_per_seq_ms=0, step_per_prefill_token_ms=0))
    a = e.submit(EngineRequest(prompt_words=words(10), output_tokens=1000), now=0.0)
    b = e.submit(EngineRequest(prompt_words=words(10, "b"), output_tokens=2), now=0.0)
    e.advance(0.0)
    e.advance(e.next_event_time())
    assert e.num_waiting == 1
    e.abort(a)
    assert a.state == "aborted" and e.kv_used == 0
    run_until_idle(e, now=0.02)
    assert b.state == "finished"


def test_stall_and_slow_first_faults_shift_the_token_times():
    e = FixedEngine(ttft_ms=50, itl_ms=10)
    s = e.submit(EngineRequest(prompt_words=words(5), output_tokens=3, slow_first_s=1.0), now=0.0)
    ems = run_until_idle(e)
    assert ems[0].time == pytest.approx(1.05)
    e = FixedEngine(ttft_ms=50, itl_ms=10)
    s = e.submit(EngineRequest(prompt_words=words(5), output_tokens=3, stall_after=1, stall_s=2.0), now=0.0)
    ems = run_until_idle(e)
    assert [round(em.time, 3) for em in ems] == [0.05, 2.05, 2.06]
    assert s.state == "finished"
    b = BatchingEngine(PARAMS)
    s = b.submit(EngineRequest(prompt_words=words(5), output_tokens=3, stall_after=1, stall_s=2.0), now=0.0)
    ems = run_until_idle(b)
    assert ems[1].time - ems[0].time > 2.0


def test_fixed_engine_is_exact():
    e = FixedEngine(ttft_ms=40, itl_ms=5)
    e.submit(EngineRequest(prompt_words=words(5), output_tokens=4), now=1.0)
    assert [round(em.time, 6) for em in run_until_idle(e, now=1.0)] == [1.04, 1.045, 1.05, 1.055]


def test_fault_specs_parse_and_reject_clearly():
    assert parse_fault("429").status == 429
    assert parse_fault("disconnect:5").after_tokens == 5
    assert parse_fault("stall:1.5").seconds == 1.5
    assert parse_fault_rate("malformed:3=0.25")[1] == 0.25
    for bad in ("418", "disconnect", "disconnect:x", "stall:-1", "nope:1"):
        with pytest.raises(ValueError, match=repr(bad)[1:-1].split(":")[0]):
            parse_fault(bad)
    with pytest.raises(ValueError, match="probability"):
        parse_fault_rate("429=2")
    with pytest.raises(ValueError, match="add up"):
        FaultPicker([(parse_fault("429"), 0.7), (parse_fault("500"), 0.7)])
    picker = FaultPicker([(parse_fault("429"), 0.3)], seed=1)
    picks = [picker.pick(None) for _ in range(4000)]
    assert 0.25 < sum(p is not None for p in picks) / 4000 < 0.35
    assert picker.pick("503").status == 503


# The measured vLLM 0.6.5 / Qwen2.5-3B-Instruct / A800 table the profile must reproduce (±15 %).
A800_TABLE = {1: (46.8, 45.0, 20.7), 2: (84.2, 45.0, 21.5), 4: (164.4, 54.3, 22.0),
              8: (315.9, 84.7, 22.7), 16: (588.5, 120.6, 24.3)}
A800_PROMPTS = [[f"p{i}w{j}" for j in range(512)] for i in range(8)]  # 8 prompts of 512 tokens
A800_CLIENT_GAP_MS = 200.0


@pytest.mark.parametrize("conc", sorted(A800_TABLE))
def test_a800_profile_matches_the_measured_table(conc):
    tps, ttft, tpot = A800_TABLE[conc]
    params = PROFILES["qwen2.5-3b-a800"].engine
    r = closed_loop(lambda: BatchingEngine(params), conc, A800_PROMPTS, 128, requests_per_user=6,
                    client_gap_ms=A800_CLIENT_GAP_MS)
    assert r.output_tps == pytest.approx(tps, rel=0.15)
    assert r.ttft_p50_ms == pytest.approx(ttft, rel=0.15)
    assert r.tpot_p50_ms == pytest.approx(tpot, rel=0.15)


def test_a_late_advance_gives_each_emission_its_own_token_count():
    # A driver that wakes late gets several emissions of one sequence from one advance; each must
    # say how many tokens the sequence had then (the stream writer numbers words and places
    # faults by it), not the count after the whole batch.
    engine = FixedEngine(ttft_ms=0.0, itl_ms=1.0)
    seq = engine.submit(EngineRequest(prompt_words=["w"] * 4, output_tokens=5), now=0.0)
    emissions = engine.advance(0.0105)
    assert [e.generated for e in emissions] == [1, 2, 3, 4, 5]
    assert [e.first for e in emissions] == [True, False, False, False, False]
    assert [e.finished for e in emissions] == [False, False, False, False, True]
    assert seq.generated == 5
