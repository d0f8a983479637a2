"""Server hooks end to end (issue 22): a real Locust step run against the mock resets its prefix cache
before the first request and runs its profiler once, around the chosen step's measured window as the
report measures it; PREFIX_run.json names every call. A failing profiler is a warning and the run
goes on; a failing reset ends the run before any load. The mock's reset really empties its cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

from tests.support.locust_runs import CHAT, load_rows, run_locust
from tests.support.processes import ROOT, free_port

STEPS = os.path.join(ROOT, "locustfiles", "steps.py")


def _admin_calls(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _report(prefix, tmp_path) -> dict:
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--out", str(out),
                          "--no-archive"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def test_the_profiler_runs_once_around_the_chosen_steps_window_after_a_reset(mock_factory, tmp_path):
    admin = tmp_path / "admin.jsonl"
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "3", "--admin-log", str(admin))
    prefix = tmp_path / "hooked"
    res = run_locust(["-f", STEPS, "--host", mock.url, "--headless", "--csv", str(prefix), "--steps", "2,4,6",
                      "--step-seconds", "6", "--search-warmup-s", "2", "--profile-step", "2", "--reset-cache", "auto",
                      "--profile-options", '{"activities": ["GPU"]}', "--output-tokens", "8", "--input-tokens", "20",
                      "--stop-timeout", "10", "--only-summary"], tmp_path, timeout=150)
    assert res.returncode == 0, res.stderr[-3000:]
    calls = _admin_calls(admin)
    assert [c["path"] for c in calls] == ["/reset_prefix_cache", "/start_profile", "/stop_profile"], calls
    assert all(c["status"] == 200 for c in calls) and calls[1]["body"] == {"activities": ["GPU"]}
    requests = mock.log(expect=len(load_rows(prefix)))
    assert calls[0]["arrival_unix"] < min(e["arrival_unix"] for e in requests)  # auto: the mock speaks vLLM
    step = _report(prefix, tmp_path)["steps"][1]
    assert step["users"] == 4 and abs(step["measured_from"] - step["start_time"] - 2.0) < 0.01
    # started just before the window opened (within the step), stopped when it closed (the next step's
    # first request), give or take the master's 0.2-s look and a loaded machine
    assert step["start_time"] - 0.5 <= calls[1]["arrival_unix"] <= step["measured_from"]
    assert step["end_time"] - 0.5 <= calls[2]["arrival_unix"] <= step["end_time"] + 5.0
    manifest = json.loads((tmp_path / "hooked_run.json").read_text())
    hooks = manifest["server_hooks"]
    assert [(h["hook"], h["path"], h["http_status"], h["ok"]) for h in hooks] == [
        ("reset_cache", "/reset_prefix_cache", 200, True), ("start_profile", "/start_profile", 200, True),
        ("stop_profile", "/stop_profile", 200, True)]
    assert hooks[0]["engine"] == "vllm"
    assert all(abs(h["time"] - c["arrival_unix"]) < 1.0 for h, c in zip(hooks, calls, strict=True))
    profiled = manifest["profile_step"]
    assert profiled["step"] == 2 and profiled["started"] and profiled["stopped"] and profiled["why_not"] is None
    assert abs(profiled["window_opens"] - step["measured_from"]) < 1.5


def test_a_failing_profiler_is_a_warning_in_the_manifest_and_the_run_goes_on(mock_factory, tmp_path):
    admin = tmp_path / "admin.jsonl"
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "3", "--admin-log", str(admin),
                        "--fail-admin", "/start_profile")
    prefix = tmp_path / "failing"
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "2", "-r", "2", "-t", "7s", "--csv",
                      str(prefix), "--profile-step", "1", "--output-tokens", "8", "--stop-timeout", "10"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "POST /start_profile answered HTTP 500" in res.stderr and "the run goes on" in res.stderr
    assert [(c["path"], c["status"]) for c in _admin_calls(admin)] == [("/start_profile", 500)]  # nothing to stop
    manifest = json.loads((tmp_path / "failing_run.json").read_text())
    (hook,) = manifest["server_hooks"]
    assert (hook["hook"], hook["http_status"], hook["ok"]) == ("start_profile", 500, False)
    assert "HTTP 500" in hook["error"] and "the run went on" in hook["note"]
    assert not manifest["profile_step"]["started"] and "HTTP 500" in manifest["profile_step"]["why_not"]
    rows = load_rows(prefix)
    assert len(rows) >= 20 and rows["start_time"].max() > hook["time"]  # the load went on after it


def test_a_failing_reset_ends_the_run_before_any_load(mock_factory, tmp_path):
    admin = tmp_path / "admin.jsonl"
    mock = mock_factory("--profile", "fixed", "--admin-log", str(admin), "--fail-admin", "/flush_cache")
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "2", "-r", "2", "-t", "5s", "--csv",
                      str(tmp_path / "cold"), "--reset-cache", "sglang"], tmp_path)
    assert res.returncode == 1
    said = [line for line in res.stderr.splitlines()
            if line.startswith("llmload: --reset-cache sglang: POST /flush_cache answered HTTP 500")]
    assert len(said) == 1 and "no load was sent" in said[0], res.stderr[-3000:]
    assert [c["path"] for c in _admin_calls(admin)] == ["/flush_cache"] and mock.log() == []


def _chat(url: str, words: int) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": " ".join(["same"] * words)}],
                       "max_tokens": 2, "stream": False}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()


def test_the_mock_reset_empties_its_prefix_cache_and_a_dead_server_is_an_error(mock_factory):
    from llmload.server_metrics.engine_admin import reset_cache
    from llmload.sweep.server import reset_server

    mock = mock_factory("--profile", "vllm-v1")
    _chat(mock.url, 200)
    _chat(mock.url, 200)
    for engine in ("vllm", "sglang"):
        done = reset_cache(mock.url, engine)
        assert done.ok and done.http_status == 200, done.error
        _chat(mock.url, 200)
    cached = [e["cached_tokens"] for e in mock.log(expect=4)]
    assert cached[0] == 0 and cached[1] > 100 and cached[2:] == [0, 0]
    dead_url = f"http://127.0.0.1:{free_port()}"
    dead = reset_cache(dead_url, "vllm", timeout_s=5.0)
    assert not dead.ok and dead.http_status is None and dead.error.startswith("POST /reset_prefix_cache failed:")
    # llmload sweep resets each cell with the same call: a failure is a note, not an exception
    assert reset_server(mock.url, "sglang") is None
    assert reset_server(dead_url, "vllm", timeout_s=5.0).startswith("reset vllm: POST /reset_prefix_cache failed:")


def test_in_a_distributed_run_only_the_master_calls_the_server(mock_factory, tmp_path):
    admin = tmp_path / "admin.jsonl"
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "3", "--admin-log", str(admin))
    port = str(free_port())
    res = run_locust(["-f", STEPS, "--host", mock.url, "--headless", "--csv", str(tmp_path / "dist"), "--steps", "2,4",
                      "--step-seconds", "5", "--search-warmup-s", "1", "--profile-step", "2", "--reset-cache", "vllm",
                      "--processes", "2", "--master-bind-port", port, "--master-port", port, "--output-tokens", "8",
                      "--stop-timeout", "10", "--only-summary"], tmp_path, timeout=150)
    assert res.returncode == 0, res.stderr[-3000:]
    assert set(load_rows(tmp_path / "dist")["worker"]) == {0, 1}
    assert [c["path"] for c in _admin_calls(admin)] == ["/reset_prefix_cache", "/start_profile", "/stop_profile"]
