"""The mock's simulated GPUs (llmload/mock/telemetry/gpu_telemetry.py): the power model's exact energy, the
activity that follows the token mix, throttling, and /dcgm/metrics read back by llmload's own
DCGM reader (llmload/server_metrics/gpu.py)."""

from __future__ import annotations

import pytest

from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, EngineRequest
from llmload.mock.telemetry.gpu_telemetry import POWER_CAP, SLOWDOWN, GpuMeter, GpuModel, parse_throttle, render_dcgm
from llmload.server_metrics import parse_exposition
from llmload.server_metrics.gpu import gpu_readings, gpu_samples
from llmload.server_metrics.gpu_window import gpu_step

MODEL = GpuModel(gpus=2, idle_w=50.0, j_per_prefill_token=0.01, j_per_decode_token=0.5)


def test_energy_is_idle_plus_tokens_spread_over_their_step() -> None:
    meter = GpuMeter(MODEL, t0=0.0)
    meter.on_step(0.0, 0.1, prefill_tokens=1000, decode_tokens=0, first_tokens=1)
    meter.on_step(0.1, 0.05, prefill_tokens=0, decode_tokens=8)
    assert meter.energy_j(0.15) == pytest.approx(2 * 50 * 0.15 + 1000 * 0.01 + 8 * 0.5)
    assert meter.energy_j(0.125) == pytest.approx(2 * 50 * 0.125 + 10.0 + 4 * 0.5 / 2 * 2)  # half the 2nd step
    assert meter.output_tokens(0.12) == 1 and meter.output_tokens(0.15) == 9  # counted when the step ends
    assert (meter.prefill_tokens, meter.decode_tokens) == (1000, 8)


def _load(prefill: int, decode: int, steps: int = 50) -> tuple[list[tuple[float, dict]], GpuMeter]:
    meter = GpuMeter(MODEL, t0=0.0)
    points = [(0.0, gpu_readings(gpu_samples(parse_exposition(render_dcgm(meter, 0.0))))[0])]
    for i in range(steps):
        meter.on_step(i * 0.02, 0.02, prefill_tokens=prefill, decode_tokens=decode)
    end = steps * 0.02
    points.append((end, gpu_readings(gpu_samples(parse_exposition(render_dcgm(meter, end))))[0]))
    return points, meter


def test_the_activity_follows_the_profile_and_the_counter_matches_the_exact_energy() -> None:
    decode_points, meter = _load(prefill=0, decode=64)
    step = gpu_step(decode_points, 0.0, 1.0)
    assert step.total["bound_by"] == "memory-bandwidth-bound"
    assert step.total["util"] == pytest.approx(1.0)
    assert step.total["dram_active"] == pytest.approx(0.85) and step.total["tensor_active"] == pytest.approx(0.15)
    assert step.total["energy_j"] == pytest.approx(meter.energy_j(1.0), abs=2e-3)  # whole mJ per GPU
    prefill_points, _ = _load(prefill=2048, decode=0)
    assert gpu_step(prefill_points, 0.0, 1.0).total["bound_by"] == "compute-bound"
    idle = GpuMeter(MODEL, t0=0.0)
    idle_points = [(t, gpu_readings(gpu_samples(parse_exposition(render_dcgm(idle, t))))[0]) for t in (0.0, 1.0)]
    idle_step = gpu_step(idle_points, 0.0, 1.0)
    assert idle_step.total["bound_by"] == "underused"
    assert idle_step.total["power_w"] == pytest.approx(2 * 50.0)


def test_throttling_slows_steps_and_shows_in_the_reasons() -> None:
    meter = GpuMeter(GpuModel(throttle=(1.0, 2.0)), t0=0.0)
    assert meter.slowdown(11.5) == 1.0  # no request yet: the throttle's clock has not started
    meter.load_started(10.0)
    meter.load_started(10.4)  # only the first request counts
    assert meter.slowdown(10.5) == 1.0 and meter.slowdown(11.5) == SLOWDOWN and meter.slowdown(13.0) == 1.0
    before = _one(render_dcgm(meter, 10.5))
    during = _one(render_dcgm(meter, 12.0))
    after = _one(render_dcgm(meter, 14.0))
    assert int(before["clock_event_reasons"]) & POWER_CAP == 0 and int(during["clock_event_reasons"]) == POWER_CAP
    assert during["sm_clock_mhz"] < before["sm_clock_mhz"]
    assert (before["power_violation_ns"], during["power_violation_ns"], after["power_violation_ns"]) == (0, 1e9, 2e9)
    assert parse_throttle("30:20") == (30.0, 20.0)
    for bad in ("30", "x:1", "5:0", "-1:3"):
        with pytest.raises(ValueError, match="--gpu-throttle"):
            parse_throttle(bad)


def _one(text: str) -> dict[str, float]:
    readings, _ = gpu_readings(gpu_samples(parse_exposition(text)))
    return next(iter(readings.values()))


def test_the_batching_engine_tells_the_meter_every_step() -> None:
    engine = BatchingEngine(EngineParams(step_base_ms=10.0, step_per_seq_ms=0.0, step_per_prefill_token_ms=0.0,
                                         api_overhead_ms=0.0, schedule_delay_ms=0.0))
    engine.gpu = meter = GpuMeter(MODEL, t0=0.0)
    engine.submit(EngineRequest(prompt_words=["w"] * 100, output_tokens=5), now=0.0)
    t = 0.0
    while (nxt := engine.next_event_time()) is not None:
        t = nxt
        engine.advance(t)
    assert engine.stats.generation_tokens == 5
    assert (meter.prefill_tokens, meter.decode_tokens, meter.output_tokens(t)) == (100, 4, 5)
    assert meter.energy_j(t) == pytest.approx(2 * 50 * t + 100 * 0.01 + 4 * 0.5)
