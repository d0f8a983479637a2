"""Speculative decoding (issue 22): the mock's simulated drafts (vLLM's counters, SGLang's gauges),
read back through llmload's engine mapping into a step's acceptance rate and accepted length."""

from __future__ import annotations

import pytest

from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, EngineRequest
from llmload.mock.engine.metrics_state import EngineStats
from llmload.mock.engine.spec_decode import SpecDecode
from llmload.mock.telemetry.prometheus import render_metrics
from llmload.server_metrics import aggregate_step, parse_exposition, snapshot

pytestmark = pytest.mark.unit


def test_the_accepted_share_of_draft_tokens_is_the_configured_acceptance():
    spec = SpecDecode(acceptance=0.7, tokens=4, seed=3)
    for _ in range(20_000):
        spec.draft()
    assert spec.draft_tokens == 80_000 and abs(spec.accept_rate - 0.7) < 0.01
    assert spec.accept_length == pytest.approx(1 + spec.accepted / 20_000)
    assert spec.per_position[0] >= spec.per_position[1] >= spec.per_position[3] and sum(spec.per_position) == \
        spec.accepted
    with pytest.raises(ValueError, match="--spec-decode-acceptance 1.5: expected a share 0..1"):
        SpecDecode(acceptance=1.5)


@pytest.mark.parametrize("fmt", ["vllm", "sglang"])
def test_a_steps_acceptance_comes_from_the_engines_own_metrics(fmt):
    params = EngineParams()
    engine = BatchingEngine(params)
    engine.stats = EngineStats(fmt, params.max_model_len)
    engine.stats.spec = SpecDecode(acceptance=0.6, tokens=3, seed=1)
    before = snapshot(parse_exposition(render_metrics(engine, "m", {})))
    for _ in range(8):
        engine.submit(EngineRequest(prompt_words=["w"] * 20, output_tokens=200), now=0.0)
    t = 0.0
    for _ in range(400):
        engine.advance(t)
        nxt = engine.next_event_time()
        if nxt is None:
            break
        t = nxt
    after = snapshot(parse_exposition(render_metrics(engine, "m", {})))
    spec = engine.stats.spec
    assert spec.drafts > 500
    stats = aggregate_step([(0.0, before), (10.0, after)], 0.0, 10.0)
    if fmt == "vllm":  # counter deltas over the step: exactly the mock's own
        assert stats.spec_accept_rate == pytest.approx(spec.accept_rate)
        assert stats.spec_accept_length == pytest.approx(1 + spec.accepted / spec.drafts)
    else:  # SGLang's gauges: their mean over the step's scrapes
        assert stats.spec_accept_rate == pytest.approx((0.0 + spec.accept_rate) / 2)
    assert abs(spec.accept_rate - 0.6) < 0.05


def test_without_a_draft_model_there_is_no_spec_decode_entry():
    engine = BatchingEngine(EngineParams())
    engine.stats = EngineStats("vllm", EngineParams().max_model_len)
    text = render_metrics(engine, "m", {})
    assert "spec_decode" not in text
    s = snapshot(parse_exposition(text))
    stats = aggregate_step([(0.0, s), (1.0, s)], 0.0, 1.0)
    assert stats.spec_accept_rate is None and stats.spec_accept_length is None
