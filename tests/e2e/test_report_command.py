"""`llmload report` as a command, in its own process: the files it names after the prefix, the SLOs a
scenario file scopes to its workloads, and a scenario file that is not there."""

from __future__ import annotations

import json
import subprocess
import sys

from llmload.report import build_report, write_report
from tests.support.processes import ROOT
from tests.support.report_rows import ladder, req, write_csv


def test_report_files_are_named_after_the_prefix_and_leave_empty_sections_out(tmp_path):
    rows = ladder([(4, 20), (8, 20)])
    for r in rows:
        r["cached_tokens"] = 0  # a chat run: the server reports cached tokens, none hit
    prefix = write_csv(tmp_path / "chat_requests.csv", rows)
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "report", prefix, "--slo", "ttft_p95_ms=1000"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    for name in ("chat_report.md", "chat_report.html", "chat_report.json", "chat_vllm_bench_serve.json"):
        assert (tmp_path / name).exists(), name
    assert not (tmp_path / "report.md").exists()
    md = (tmp_path / "chat_report.md").read_text()
    assert "| users | measured s | requests (ok) | errors | req/s |" in md  # one users column
    assert "Prefix cache" not in md and "Warnings" not in md
    html = (tmp_path / "chat_report.html").read_text()
    assert "alt='errors'" not in html  # nothing failed: no chart of failures
    assert "see chat_report.html" in md
    data = json.loads((tmp_path / "chat_report.json").read_text())
    assert data["error_budget"].startswith("error_rate ≤ 0.01") and data["sample_floor"] == 30
    rep = build_report(prefix)
    write_report(rep, str(tmp_path / "out"))
    assert (tmp_path / "out" / "report.html").exists()


def test_slos_from_a_scenario_file_are_scoped_to_their_workloads(tmp_path):
    rows = [req(1000 + i * 0.5, 4, ttft=100.0 if i % 2 else 4000.0, scenario="rag") for i in range(60)]
    prefix = write_csv(tmp_path / "s_requests.csv", rows)
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "report", prefix, "--scenario", "scenarios/rag.yaml",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "o" / "report.json").read_text())
    assert data["scenarios"]["rag"]["slos"] == ["rag:ttft_p95_ms=3000", "rag:tpot_p95_ms=60", "error_rate=0.01"]
    assert data["scenarios"]["rag"]["steps"][0]["slo_met"] is False  # half the requests take 4 s
    bad = subprocess.run([sys.executable, "-m", "llmload.cli", "report", prefix, "--scenario", "nope.yaml"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "nope.yaml" in bad.stderr
