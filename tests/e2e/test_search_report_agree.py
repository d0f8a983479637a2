"""A real headless search against the mock, then `llmload report` on its CSVs: one step verdict,
so the same capacity and, step by step, the same met/broken labels (issue 25, item 3)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from tests.support.locust_runs import KNOWN_CAPACITY_MOCK, run_locust
from tests.support.processes import ROOT

STEP_LINE = re.compile(r"llmload search: step (\d+) at (\d+) users: (met every SLO|broke .*|no verdict: .*)")
LABEL = {"met every SLO": "met", "broke": "broken", "no verdict": "too few requests"}


def test_the_report_names_the_capacity_and_the_verdicts_the_search_found(mock_factory, tmp_path):
    """16 sequences fit the engine; from 17 users on a request waits ~0.8 s for a slot, so under a
    200-ms TTFT p95 SLO (scoped to the run's one scenario) the knee is 16 users. [8, 24] to within 4:
    16 ✓, 20 ✗, then 16 once more: three steps of ~8 s (2-s warm-up)."""
    mock = mock_factory(*KNOWN_CAPACITY_MOCK)
    prefix = tmp_path / "agree"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "search.py"), "--host", mock.url, "--headless",
                      "--csv", str(prefix), "--slo", "chat:ttft_p95_ms=200", "--search", "users", "--search-min", "8",
                      "--search-max", "24", "--search-precision", "4", "--search-warmup-s", "2", "--ignore-eos",
                      "--output-tokens", "40", "--input-tokens", "20"], tmp_path, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    printed = [(int(n), int(level), next(v for k, v in LABEL.items() if said.startswith(k)))
               for n, level, said in STEP_LINE.findall(out)]
    m = re.search(r"search: (\d+) steps \(at most \d+ for 8\.\.24 to within 4\); capacity (\d+) users", out)
    assert m and printed, out[-3000:]
    capacity = int(m.group(2))
    assert capacity == 16 and [p[1] for p in printed] == [16, 20, 16]

    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--slo",
                          "chat:ttft_p95_ms=200"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((tmp_path / "agree_report.json").read_text())
    shape = data["run"]["shape"]
    assert data["warmup_s"] == 2.0 and shape["capacity"] == capacity == data["capacity"]["users"]
    # Step by step: the report measured each probe over the window the search judged, and agrees.
    by_window = {(s["level"], s["measured_from"]): s for s in data["steps"]}
    for (n, level, label), probe in zip(printed, shape["steps"], strict=True):
        step = by_window[(level, round(probe["measured_from"], 3))]
        assert step["end_time"] == round(probe["judged_until"], 3), (n, step, probe)
        assert step["verdict"].split(" (")[0] == label, (n, step["verdict"], probe, step["slo"])
        assert probe["verdict"] == {"too few requests": "no verdict"}.get(label, label)
    assert "capacity: 16 users" in rep.stdout or "capacity (users) | 16" in (tmp_path / "agree_report.md").read_text()
