"""llmload.report.sections.gpu: PREFIX_gpu_metrics.csv joined to the steps: energy per token and request, the
energy cost, bound-by, and a throttled step that is never capacity (unless --allow-throttled)."""

from __future__ import annotations

import csv

import pytest

from llmload import files
from llmload.report import ReportOptions, build_report
from llmload.report.charts import gpu_per_step
from llmload.report.render import blocks
from llmload.report.sections.gpu import client_work, gpu_columns
from tests.support.report_rows import req, write_csv

LABELS = 'gpu="0",UUID="GPU-a",modelName="NVIDIA H100 80GB HBM3",hostname="n1",pod="vllm-0",namespace="llm"'


def _run(tmp_path, throttle_from: float | None = 60.0) -> str:
    """Users 4 for 40 s (4 req/s), then 8 for 40 s (8 req/s); each request 1 s long, 91 tokens. The
    GPU draws 300 W, then 500 W; from ``throttle_from`` its clocks say power cap."""
    rows = [req(i * 0.25, 4) for i in range(160)] + [req(40 + i * 0.125, 8) for i in range(320)]
    prefix = write_csv(tmp_path / "g_requests.csv", rows)
    with open(files.path(prefix, files.GPU_METRICS), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(files.SERVER_METRICS_COLUMNS)
        energy_mj = 1e9
        for t in range(0, 81):
            watts = 300.0 if t <= 40 else 500.0
            if t:
                energy_mj += watts * 1000.0
            reasons = 4 if throttle_from is not None and t >= throttle_from else 0
            for metric, value in (("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", energy_mj),
                                  ("DCGM_FI_DEV_POWER_USAGE", watts), ("DCGM_FI_PROF_DRAM_ACTIVE", 0.8),
                                  ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.2), ("DCGM_FI_DEV_GPU_UTIL", 99),
                                  ("DCGM_FI_DEV_FB_USED", 73403), ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", reasons)):
                out.writerow([float(t), "http://n1:9400/metrics", metric, LABELS, value])
            out.writerow([float(t), "http://n1:9400/metrics", "up", 'engine="dcgm"', 1])
    return prefix


def test_energy_per_token_and_request_over_the_same_window(tmp_path):
    report = build_report(_run(tmp_path, throttle_from=None), ReportOptions(warmup_s=5.0, usd_per_kwh=0.2,
                                                                            gpu_hourly_usd=2.0))
    first, second = (s.data for s in report.overall.steps)
    g = first["gpu"]
    assert g["window"] == [5.0, 40.0] and g["energy_j"] == pytest.approx(35 * 300.0)
    assert g["output_tokens"] == pytest.approx(35 * 4 * 91, rel=0.005)  # 364 tokens/s, edges spread
    assert g["requests"] == pytest.approx(35 * 4, rel=0.01)
    assert g["j_per_output_token"] == pytest.approx(300.0 / 364.0, rel=0.005)
    assert g["j_per_request"] == pytest.approx(300.0 / 4, rel=0.01)
    assert g["energy_usd_per_million_output_tokens"] == pytest.approx(g["j_per_output_token"] * 1e6 / 3.6e6 * 0.2)
    assert g["power_w"] == 300.0 and g["fb_used_mib"] == 73403 and g["util"] == pytest.approx(0.99)
    assert g["bound_by"] == "memory-bandwidth-bound"
    assert g["per_gpu"]["GPU-a"]["pod"] == "vllm-0" and g["per_gpu"]["GPU-a"]["energy_source"] == "counter"
    assert second["gpu"]["j_per_output_token"] == pytest.approx(500.0 / 728.0, rel=0.01)
    cap = report.overall.capacity  # no SLO: the step with the highest throughput
    assert cap["users"] == 8 and cap["gpu"]["j_per_output_token"] == second["gpu"]["j_per_output_token"]
    assert report.overall.cost["energy_usd_per_hour"] == pytest.approx(0.5 * 0.2)
    assert gpu_columns(report)["gpu_bound_by"] == "memory-bandwidth-bound"
    md = "\n".join(b.heading or "" for b in blocks(report))
    assert "GPUs" in md and any(b.chart == "gpu" for b in blocks(report))
    assert "<svg" in (gpu_per_step([s.data for s in report.overall.steps]) or "")


def test_a_throttled_step_is_never_capacity_unless_allowed(tmp_path):
    prefix = _run(tmp_path)
    report = build_report(prefix, ReportOptions(warmup_s=5.0))
    first, second = (s.data for s in report.overall.steps)
    assert "gpu_flag" not in first and second["gpu_flag"] == "GPU throttled (power_cap)"
    assert second["never_capacity"] and second["gpu"]["throttled"]
    cap = report.overall.capacity
    assert cap["users"] == 4  # the faster step was measured on a throttled GPU
    assert cap["never_capacity"] == [{"level": 8, "users": 8, "why": "GPU throttled (power_cap)"}]
    assert any("step 8: GPU throttled (power_cap): never capacity" in w for w in report.warnings)
    allowed = build_report(prefix, ReportOptions(warmup_s=5.0, allow_throttled=True))
    assert allowed.overall.capacity["users"] == 8 and allowed.overall.steps[1].data["gpu_flag"]


def test_a_run_without_gpu_metrics_says_so_once(tmp_path):
    prefix = write_csv(tmp_path / "n_requests.csv", [req(i * 0.25, 4) for i in range(80)])
    report = build_report(prefix, ReportOptions(warmup_s=2.0))
    assert [n for n in report.notes if n.startswith("GPU metrics")] == [
        "GPU metrics: none in this run (--gpu-metrics URL of a DCGM exporter puts the GPUs in the report)"]
    assert all("gpu" not in s.data for s in report.overall.steps) and gpu_columns(report) == {}


def test_client_work_counts_the_first_token_at_ttft_and_spreads_the_rest():
    import pandas as pd

    df = pd.DataFrame({"ok": [True, True, False], "start_time": [0.0, 0.0, 0.0], "end_time": [10.0, 1.0, 1.0],
                       "ttft_ms": [1000.0, float("nan"), 10.0], "completion_tokens": [10, 1, 50]})
    tokens, requests = client_work(df, 5.0, 10.0)
    assert tokens == pytest.approx(9 * 5 / 9)  # the first at 1 s is outside; 9 more over 1-10 s, 5 s inside
    assert requests == pytest.approx(0.5)
