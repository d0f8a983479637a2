"""A server the suite starts ahead of its tier (scripts/test_suite.py ``AHEAD``; tests/support/vllm.py):
one process adopts it, back at the normal scheduling class; one nobody adopted is stopped at the
suite's end. A plain ``sleep`` stands in for vLLM: what is tested is the hand-over, not the engine."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support import vllm


def _ahead(tmp_path, name: str = "small") -> subprocess.Popen:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True,  # at idle priority before it runs: no race
                            preexec_fn=lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)))
    (tmp_path / vllm.PRELAUNCHED.format(name=name)).write_text(json.dumps(
        {"url": "http://127.0.0.1:1", "pid": proc.pid, "args": ["--max-num-seqs", "2"], "log": str(tmp_path / "l"),
         "model": str(tmp_path)}))
    return proc


def test_one_process_adopts_the_server_at_the_normal_scheduling_class(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("leaving SCHED_IDLE needs root")
    proc = _ahead(tmp_path)
    monkeypatch.setenv("LLMLOAD_PREPARED", str(tmp_path))
    try:
        assert os.sched_getscheduler(proc.pid) == os.SCHED_IDLE
        server = vllm._adopt("small")
        assert server is not None and server.proc.pid == proc.pid and server.url == "http://127.0.0.1:1"
        assert server.launch[0] == ["--max-num-seqs", "2"]
        assert os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
        assert vllm._adopt("small") is None  # taken once
        assert server.proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            server.proc.wait(0.1)
        vllm.stop_vllm_server(server, timeout=5)
        assert proc.wait(5) is not None and server.proc.poll() is not None
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_or_missing_server_is_not_adopted_and_one_left_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMLOAD_PREPARED", str(tmp_path))
    assert vllm._adopt("small") is None  # none started ahead
    proc = _ahead(tmp_path)
    proc.kill()
    proc.wait()
    assert vllm._adopt("small") is None  # started, but gone
    proc = _ahead(tmp_path)
    try:
        assert vllm.stop_prelaunched(tmp_path) == ["vllm-small"]
        assert proc.wait(5) == -9 and not list(tmp_path.glob("vllm-*.json"))
    finally:
        proc.kill()
        proc.wait()
