"""A misconfigured run ends at init with one line naming the problem and exit code 1; the
`llmload` commands reject bad values with a usage message; locustfiles work from any directory."""

from __future__ import annotations

import os
import sys

import pandas as pd
import pytest

from tests.support.locust_runs import SYNTHETIC, llmload_lines, run
from tests.support.processes import ROOT, free_port

LOCUST = [sys.executable, "-m", "locust"]
CHAT = os.path.join(ROOT, "locustfiles", "chat.py")
UI = os.path.join(ROOT, "locustfiles", "ui.py")
RAG_PIPELINE = os.path.join(ROOT, "locustfiles", "rag_pipeline.py")

BAD = [
    ("no host", [CHAT], "no server address: pass --host"),
    ("unknown endpoint", [CHAT, "--endpoint", "chats"], "--endpoint 'chats': expected one of chat"),
    ("messages over the openai sdk", [CHAT, "--endpoint", "messages", "--transport", "openai"],
     "--transport openai cannot send the Anthropic Messages API (endpoint messages)"),
    ("a pipeline over the openai sdk", [RAG_PIPELINE, "--transport", "openai"],
     "--transport openai: workload rag (a pipeline) sends whole-body requests on the fast transport only"),
    ("unknown transport", [CHAT, "--transport", "grpc"], "--transport 'grpc': expected one of fast, openai"),
    ("missing scenario", [CHAT, "--scenario", "no/such.yaml"], "no/such.yaml: cannot read the scenario file"),
    ("mistyped key", [CHAT, "--scenario", "{typo}"], "workloads.chat.input_tokns: unknown key; did you mean "
                                                     "input_tokens?"),
    ("bad length", [SYNTHETIC, "--output-tokens", "abc"], "--output-tokens 'abc': expected N or LOW-HIGH"),
    ("bad length in scenario", [CHAT, "--input-tokens", "9-3"], "--input-tokens: expected 0 <= LOW <= HIGH"),
    ("bad slo", [CHAT, "--slo", "ttft_p95=3"], "--slo 'ttft_p95=3': unknown metric 'ttft_p95'"),
    ("bad steps", [SYNTHETIC, "--steps", "4,x"], "--steps '4,x': expected user counts"),
    ("several shapes, no picker", [UI], "several load shapes (Ramp, Search, Steps): start Locust with --class-picker"),
]


@pytest.mark.parametrize("name,args,message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_configuration_fails_once_at_init(tmp_path, name, args, message):
    typo = tmp_path / "typo.yaml"
    typo.write_text("workloads:\n  chat:\n    input_tokns: 5\n")
    args = [a.replace("{typo}", str(typo)) for a in args]
    host = [] if name == "no host" else ["--host", "http://127.0.0.1:9"]
    res = run([*LOCUST, "-f", *args, *host, "--headless", "-u", "2", "-r", "2", "-t", "3s"], tmp_path)
    assert res.returncode == 1, res.stdout[-1000:] + res.stderr[-2000:]
    lines = llmload_lines(res)
    assert len(lines) == 1 and message in lines[0], lines
    assert "Traceback" not in res.stderr


def test_a_bad_configuration_fails_once_with_worker_processes(tmp_path):
    port = str(free_port())  # not Locust's default 5557: another run on this machine may hold it
    res = run([*LOCUST, "-f", CHAT, "--host", "http://127.0.0.1:9", "--headless", "-u", "2", "-t", "3s",
               "--processes", "2", "--master-bind-port", port, "--master-port", port, "--slo", "nope=1"], tmp_path)
    assert res.returncode == 1
    lines = llmload_lines(res)
    assert len(lines) == 1 and "unknown metric 'nope'" in lines[0], lines
    assert "Traceback" not in res.stderr


def test_locust_help_lists_llmloads_options(tmp_path):
    res = run([*LOCUST, "-f", CHAT, "--help"], tmp_path)
    assert res.returncode == 0
    section = res.stdout.split("\nllmload:\n", 1)
    assert len(section) == 2, res.stdout[-2000:]
    for flag in ("--scenario", "--transport", "--endpoint", "--input-tokens", "--slo", "--request-timeout",
                 "--steps", "--seed"):
        assert flag in section[1]


@pytest.mark.parametrize("args,message", [
    (["mock", "--port", "99999"], "argument --port: expected a port number 0-65535, got 99999"),
    (["mock", "--port", "http"], "argument --port: expected a port number 0-65535, got 'http'"),
    (["report", "x", "--headroom", "lots"], "argument --headroom: invalid float value"),
    (["demo", "--step-seconds", "-2"], "argument --step-seconds: expected seconds > 0"),
    (["demo", "--steps", "8,x"], "argument --steps: expected user counts"),
])
def test_llmload_commands_reject_bad_values_with_usage(tmp_path, args, message):
    res = run([sys.executable, "-m", "llmload.cli", *args], tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("usage: llmload") and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_a_locustfile_run_from_another_directory_keeps_its_scenarios_slo_and_shape(mock_factory, tmp_path):
    """The locustfile names its scenario relative to itself; the run starts elsewhere. The scenario's
    ``shape:`` (steps of 2 then 4 users) and its ``slo:`` (an SLO no server meets, with a stop after
    1 s, judging each step after a 1-s warm-up) must both take effect."""
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "2")
    project = tmp_path / "project"
    (project / "scen").mkdir(parents=True)
    (project / "scen" / "s.yaml").write_text(
        "shape: {steps: [2, 4], step_seconds: 4, slo_stop_after_s: 1, search_warmup_s: 1}\n"
        "workloads:\n  elsewhere:\n    input_tokens: 20\n    output_tokens: 10\n    ignore_eos: true\n"
        "    slo: {ttft_p50_ms: 0.001}\n")
    (project / "locustfile.py").write_text(
        "from llmload import LLMUser, StepLoadShape\n\n\n"
        "class ScenUser(LLMUser):\n    scenario = 'scen/s.yaml'\n\n\n"
        "class Steps(StepLoadShape):\n    steps = (50, 60)\n    step_seconds = 60\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prefix = elsewhere / "run"
    res = run([*LOCUST, "-f", str(project / "locustfile.py"), "--host", mock.url, "--headless", "--csv", str(prefix),
               "--stop-timeout", "3"], elsewhere, timeout=90)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "SLO stop: elsewhere:ttft_p50_ms=" in res.stdout + res.stderr, res.stdout[-2000:]
    rows = pd.read_csv(f"{prefix}_requests.csv")
    assert len(rows) > 10 and set(rows["scenario"]) == {"elsewhere"}
    assert rows["users"].max() <= 4  # the scenario's steps, not the class's 50 and 60
