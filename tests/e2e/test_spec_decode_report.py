"""Speculative decoding in the report (issue 22): against `llmload mock --spec-decode-acceptance 0.7`,
each step's acceptance rate (vLLM's counters, scraped during the run) is the mock's configured rate
within sampling error, and the mean accepted length 1 + 3 x 0.7."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.locust_runs import run_locust
from tests.support.processes import ROOT


def test_the_reports_acceptance_is_the_mocks_configured_rate(mock_factory, tmp_path):
    mock = mock_factory("--spec-decode-acceptance", "0.7", "--spec-decode-tokens", "3", "--seed", "5")
    prefix = tmp_path / "spec"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "steps.py"), "--host", mock.url, "--headless",
                      "--csv", str(prefix), "--steps", "4,8", "--step-seconds", "6", "--output-tokens", "64",
                      "--input-tokens", "50", "--ignore-eos", "--server-metrics-interval", "1",
                      "--stop-timeout", "10"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = tmp_path / "rep"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1",
                          "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    steps = json.loads((out / "report.json").read_text())["steps"]
    assert len(steps) == 2
    for s in steps:
        spec = s["server"]["spec_decode"]
        assert abs(spec["accept_rate"] - 0.7) < 0.05, spec  # thousands of draft tokens per step
        assert abs(spec["mean_accepted_length"] - 3.1) < 0.15, spec
    assert "speculative decoding accepted" in (out / "report.md").read_text()
