"""llmload.server_metrics.gpu and gpu_window: dcgm-exporter's output → per-GPU readings → a step's
energy, throttling and bound-by verdict. The fixture (tests/fixtures/metrics/dcgm.prom) and its
numbers are described in tests/fixtures/metrics/SOURCES.md."""

from __future__ import annotations

import pytest

from llmload.server_metrics import parse_exposition
from llmload.server_metrics.gpu import FIELDS, gpu_identity, gpu_readings, gpu_samples, throttle_reasons
from llmload.server_metrics.gpu_window import bound_by, gpu_step
from tests.support.metric_scrapes import scrapes

UUID0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
UUID1 = "GPU-9f1d2c3b-4a5e-6f70-8192-a3b4c5d6e7f8"
DEFAULT_COUNTERS = {  # etc/default-counters.csv's uncommented fields (not label-type ones)
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"}


def _points(text_by_time: list[tuple[float, str]]) -> list[tuple[float, dict[str, dict[str, float]]]]:
    return [(t, gpu_readings(gpu_samples(parse_exposition(body)))[0]) for t, body in text_by_time]


def test_the_fixture_parses_to_the_documented_fields_and_labels() -> None:
    (_, first), _ = scrapes("dcgm")
    rows = gpu_samples(parse_exposition(first))
    names = {r.metric for r in rows}
    assert names == DEFAULT_COUNTERS  # counters under the exporter's name, without the parser's _total
    assert len(rows) == 2 * len(DEFAULT_COUNTERS)
    readings, who = gpu_readings(rows)
    assert set(readings) == {UUID0, UUID1}
    gpu0 = who[UUID0]
    assert (gpu0.gpu, gpu0.uuid, gpu0.model, gpu0.hostname) == ("0", UUID0, "NVIDIA H100 80GB HBM3", "gpu-node-7")
    assert (gpu0.pod, gpu0.namespace, gpu0.container) == ("vllm-llama-70b-0", "inference", "vllm")
    r = readings[UUID0]
    assert r["util"] == pytest.approx(0.97)  # DCGM's percent as a fraction
    assert r["power_w"] == pytest.approx(512.345)
    assert r["energy_mj"] == 9876543210
    assert r["fb_used_mib"] == 78136 and r["fb_free_mib"] == 2711
    assert (r["dram_active"], r["tensor_active"], r["gr_engine_active"]) == pytest.approx((0.781, 0.212, 0.973))
    assert (r["sm_clock_mhz"], r["temp_c"], r["xid"]) == (1980, 61, 0)
    assert "sm_active" not in r  # commented out in the default counters file
    assert {f.key for f in FIELDS} >= set(r)


def test_old_label_spellings_blanks_and_a_gpu_under_two_pods() -> None:
    lines = [
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",uuid="GPU-a",Hostname="n1",pod_name="p1",pod_namespace="ns"} 100.000000',
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",uuid="GPU-a",Hostname="n1",pod_name="p2",pod_namespace="ns"} 100.000000',
        "# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge",
        'DCGM_FI_DEV_MEMORY_TEMP{gpu="0",uuid="GPU-a",Hostname="n1"} 9223372036854775794',  # README's blank
        "# TYPE DCGM_FI_PROF_DRAM_ACTIVE gauge",
        'DCGM_FI_PROF_DRAM_ACTIVE{gpu="0",uuid="GPU-a",Hostname="n1"} 140737488355328.000000',  # FP64 blank
    ]
    rows = gpu_samples(parse_exposition("\n".join(lines) + "\n"))
    assert {r.metric for r in rows} == {"DCGM_FI_DEV_POWER_USAGE"}
    readings, who = gpu_readings(rows)
    assert readings == {"GPU-a": {"power_w": 100.0}}  # counted once, not twice
    assert (who["GPU-a"].hostname, who["GPU-a"].namespace) == ("n1", "ns")
    no_uuid = gpu_identity({"gpu": "3", "GPU_I_ID": "2", "GPU_I_PROFILE": "1g.10gb"}, endpoint="http://h:9400")
    assert no_uuid.key == "http://h:9400/3/mig2" and no_uuid.mig == "1g.10gb #2"


def test_a_step_over_the_fixture_energy_from_the_counter_and_the_verdict() -> None:
    points = _points(scrapes("dcgm"))
    step = gpu_step(points, 100.0, 104.0)
    assert step.span_s == 4.0
    g0, g1 = step.per_gpu[UUID0], step.per_gpu[UUID1]
    assert g0["energy_j"] == pytest.approx(2066.0) and g1["energy_j"] == pytest.approx(1990.0)
    assert g0["energy_source"] == "counter"
    assert g0["power_w"] == pytest.approx(520.125)  # the second scrape's: the first speaks of the time before
    assert g1["sm_clock_mhz_min"] == 1755 and g1["sm_active_field"] == "gr_engine_active"
    total = step.total
    assert total["energy_j"] == pytest.approx(4056.0)
    assert total["power_w"] == pytest.approx(520.125 + 498.5)
    assert total["fb_used_mib"] == 2 * 78136
    assert total["bound_by"] == "memory-bandwidth-bound"  # DRAM 0.78 vs tensor 0.21: decode
    assert not total["throttled"] and total["xid_errors"] == []
    assert gpu_step(points, 200.0, 300.0).total == {}  # no scrape inside


def test_energy_from_power_when_the_counter_is_missing_or_reset() -> None:
    points = [(0.0, {"g": {"power_w": 100.0, "energy_mj": 5_000.0}}), (2.0, {"g": {"power_w": 300.0}}),
              (4.0, {"g": {"power_w": 300.0, "energy_mj": 1_000.0}})]
    entry = gpu_step(points, 0.0, 4.0).per_gpu["g"]
    assert entry["energy_source"] == "power"
    assert entry["energy_j"] == pytest.approx(400.0 + 600.0)  # trapezoids over 0-2 s and 2-4 s


def test_throttling_and_xid_flags() -> None:
    assert throttle_reasons(0x1) == [] and throttle_reasons(0x2 | 0x10) == []  # idle, app clocks, sync boost
    assert throttle_reasons(0x4 | 0x40) == ["power_cap", "hw_thermal"]
    quiet = {"clock_event_reasons": 1.0, "xid": 79.0, "power_violation_ns": 10.0}
    points = [(0.0, {"g": dict(quiet)}), (2.0, {"g": dict(quiet)}),
              (4.0, {"g": {**quiet, "clock_event_reasons": 4.0}}), (6.0, {"g": {**quiet, "power_violation_ns": 99.0}}),
              (8.0, {"g": {**quiet, "xid": 43.0}})]
    first = {"g": 79.0}  # an XID from before the run is not a step's
    assert not gpu_step(points, 0.0, 2.0, first).total["throttled"]
    assert gpu_step(points, 2.0, 4.0, first).per_gpu["g"]["throttle_reasons"] == ["power_cap"]
    assert gpu_step(points, 5.0, 6.5, first).total["throttled"] is False  # one scrape: no growth seen
    assert gpu_step(points, 2.0, 6.0, first).per_gpu["g"]["throttle_reasons"] == ["power_cap", "power_violation"]
    assert gpu_step(points, 0.0, 6.0, first).total["xid_errors"] == []
    assert gpu_step(points, 6.0, 8.0, first).total["xid_errors"] == [43]


@pytest.mark.parametrize(("stats", "verdict"), [
    ({"dram_active": 0.8, "tensor_active": 0.2, "sm_active": 0.9}, "memory-bandwidth-bound"),
    ({"dram_active": 0.35, "tensor_active": 0.7, "sm_active": 0.95}, "compute-bound"),
    ({"dram_active": 0.1, "tensor_active": 0.05, "sm_active": 0.2}, "underused"),
    ({"dram_active": 0.1, "tensor_active": 0.05, "sm_active": 0.6}, "memory-bandwidth-bound"),  # SM busy
    ({"dram_active": 0.2, "tensor_active": 0.25}, "underused"),
    ({"util": 0.3}, "underused"),
    ({"util": 0.9}, "unknown"),
])
def test_bound_by_thresholds(stats: dict[str, float], verdict: str) -> None:
    assert bound_by(stats)[0] == verdict
