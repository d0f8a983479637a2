"""GPU telemetry end to end: real `locust --headless` runs against `llmload mock`, whose simulated
GPUs serve dcgm-exporter's format at /dcgm/metrics (`--gpu-metrics`), and `llmload report`:

* J per output token in the report is within 1 % of the mock's own: its exact energy
  (``llmload_mock:gpu_energy_joules_total``) over its output tokens
  (``llmload_mock:gpu_output_tokens_total``) between the same two scrapes;
* the bound-by verdict follows the profile: decode-heavy is memory-bandwidth-bound, prefill-heavy
  compute-bound;
* a throttled step is never capacity, unless --allow-throttled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from llmload import files
from tests.support.locust_runs import run_locust
from tests.support.processes import ROOT, raise_priority

STEPS = os.path.join(ROOT, "locustfiles", "steps.py")


def _run(mock, prefix, tmp_path, steps: str, step_s: int, *workload: str) -> None:
    """The client's tokens are spread evenly over each request's life, the mock's are counted as
    made: a stall of the mock at a window's edge (a loaded 2-core machine) moves about stall ×
    token rate from one side to the other. Both processes run at a higher priority (where
    allowed) and the windows last 8 s or more, so that stays well inside 1 %."""
    raise_priority(mock.proc.pid)
    res = run_locust(["-f", STEPS, "--headless", "--host", mock.url, "--csv", str(prefix), "--steps", steps,
                      "--step-seconds", str(step_s), "--ignore-eos", *workload, "--server-metrics-interval", "1",
                      "--stop-timeout", "5", "--gpu-metrics", mock.url + "/dcgm/metrics"], tmp_path, boosted=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"reading GPU metrics from {mock.url}/dcgm/metrics every 1 s" in res.stderr


def _report(prefix, tmp_path, *extra: str) -> dict:
    out = tmp_path / ("report" + "".join(extra).replace("-", ""))
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "2",
                          "--sample-floor", "10", "--usd-per-kwh", "0.12", *extra, "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    return json.loads((out / "report.json").read_text())


def _mock_j_per_token(prefix, window: list[float]) -> float:
    """The mock's own energy ÷ its own output tokens between the two scrapes of ``window``."""
    df = pd.read_csv(files.path(str(prefix), files.GPU_METRICS))
    exact = {m: df[df["metric"] == m].set_index("time")["value"]
             for m in ("llmload_mock:gpu_energy_joules_total", "llmload_mock:gpu_output_tokens_total")}
    energy, tokens = (exact[m].loc[window[1]] - exact[m].loc[window[0]] for m in exact)
    assert tokens > 0
    return float(energy / tokens)


def _check_energy(data: dict, prefix) -> None:
    for step in data["steps"]:
        g = step["gpu"]
        assert g["energy_source"] == "counter" and g["span_s"] >= 5, step["level"]
        mock = _mock_j_per_token(prefix, g["window"])
        assert g["j_per_output_token"] == pytest.approx(mock, rel=0.01), (step["level"], g["output_tokens"])
        assert g["energy_usd_per_million_output_tokens"] == pytest.approx(
            g["j_per_output_token"] * 1e6 / 3.6e6 * 0.12, rel=1e-3)


def test_decode_heavy_steps_are_memory_bound_and_a_throttled_step_is_never_capacity(mock_factory, tmp_path):
    """Two GPUs, power-capped (slower steps) from 21 s after the first request: inside the last
    step's warm-up (16 users from 20 s), so it is throttled throughout and the others never are."""
    mock = mock_factory("--gpus", "2", "--gpu-throttle", "21:600")
    prefix = tmp_path / "decode"
    _run(mock, prefix, tmp_path, "4,8,16", 10, "--input-tokens", "200", "--output-tokens", "50")
    data = _report(prefix, tmp_path)
    steps = data["steps"]
    assert [s["users"] for s in steps] == [4, 8, 16]
    _check_energy(data, prefix)
    for s in steps:
        assert s["gpu"]["bound_by"] == "memory-bandwidth-bound", (s["level"], s["gpu"]["bound_by_reason"])
        assert s["gpu"]["gpus"] == 2 and len(s["gpu"]["per_gpu"]) == 2
    last = steps[-1]
    assert all("gpu_flag" not in s and not s["gpu"]["throttled"] for s in steps[:2])
    assert last["gpu"]["throttled"] and last["gpu_flag"].startswith("GPU throttled (power_cap")
    cap = data["capacity"]
    assert cap["level"] == 8, cap  # the highest step the GPUs were not throttled in
    assert not next(s for s in steps if s["start_time"] == cap["start_time"]).get("gpu_flag")
    assert [s["level"] for s in cap["never_capacity"]] == [16]
    assert cap["gpu"]["bound_by"] == "memory-bandwidth-bound" and cap["gpu"]["j_per_output_token"] > 0
    allowed = _report(prefix, tmp_path, "--allow-throttled")
    assert allowed["capacity"]["level"] == 16  # the busiest step passes every SLO: capacity once allowed


def test_prefill_heavy_steps_are_compute_bound(mock_factory, tmp_path):
    """Long prompts and short replies, without a prefix cache: the steps are mostly prefill."""
    mock = mock_factory("--no-prefix-caching")
    prefix = tmp_path / "prefill"
    _run(mock, prefix, tmp_path, "4,8", 12, "--input-tokens", "4000", "--output-tokens", "8")
    data = _report(prefix, tmp_path)
    assert [s["users"] for s in data["steps"]] == [4, 8]
    _check_energy(data, prefix)
    for s in data["steps"]:
        assert s["gpu"]["bound_by"] == "compute-bound", (s["level"], s["gpu"]["bound_by_reason"])
        assert s["gpu"]["tensor_active"] > s["gpu"]["dram_active"]
    assert not any(s.get("gpu_flag") for s in data["steps"])
