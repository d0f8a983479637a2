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
SEARCH, STEPS, PRIORITY, EMBED, RERANK = (os.path.join(ROOT, "locustfiles", f"{n}.py")
                                          for n in ("search", "steps", "priority", "embeddings", "rerank"))

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
    # Issue 32, item 1: an option no shape or user class of the run reads is refused, naming a locustfile that has it
    ("steps beside another shape", [SEARCH, "--steps", "2,4"], "--steps 2,4: the locustfile's load shape (Search) "
     "does not read it; it is read by the step shape (as in locustfiles/steps.py): drop it, or run such a locustfile"),
    ("a shape option that starts none", [CHAT, "--step-seconds", "5"], "--step-seconds 5: the locustfile has no load "
     "shape, and this option alone starts none: add --steps (the step shape), or run a locustfile that has one "
     "(locustfiles/steps.py)"),
    ("two shapes asked for", [CHAT, "--steps", "2", "--ramp-users", "4"], "--steps 2 and --ramp-users 4 ask for two "
     "load shapes (the step shape and the ramp shape); give the options of one"),
    ("precision options without the precision stop", [STEPS, "--step-sample-floor", "20"], "--step-sample-floor 20 "
     "needs --step-precision: it sets the precision stop, which is off without it"),
    ("a rate ladder without open-loop workloads", [CHAT, "--rate-steps", "2,4"], "--rate-steps 2,4: it sets the "
     "arrival rate of open-loop workloads, and no workload of this run is open-loop"),
    ("shape options with --isolation", [PRIORITY, "--isolation", "--steps", "2,4"], "--steps 2,4: --isolation runs "
     "its own phases"),
    ("a chat option with an embeddings locustfile", [EMBED, "--ignore-eos"], "--ignore-eos: no user class of this run "
     "reads it (EmbedUser (embeddings)); it applies to LLMUser's chat"),
    ("a scenario file with a rerank locustfile", [RERANK, "--scenario", "scenarios/chat.yaml"], "--scenario "
     "scenarios/chat.yaml: no user class of this run reads it (RerankUser (rerank))"),
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
    # llmload's options in groups by topic ("llmload: workload:", "llmload: SLOs:", ...), the common first
    groups = res.stdout.split("\nllmload: ")[1:]
    assert len(groups) >= 5 and groups[0].startswith("workload:"), res.stdout[-2000:]
    ours = "\n".join(groups)
    for flag in ("--scenario", "--transport", "--endpoint", "--input-tokens", "--slo", "--request-timeout",
                 "--steps", "--seed"):
        assert flag in ours, flag


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
