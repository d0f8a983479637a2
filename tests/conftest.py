"""Shared fixtures: a live `llmload mock` in its own process, on a free port of 127.0.0.1.

The test process is monkey-patched by gevent up front, as Locust does to every process that
imports it: some tests import Locust, and a process half patched mid-run misbehaves.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import pytest  # noqa: E402

from llmload.mock.launch import port_of, start_mock_process, stop_mock_process  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A calibration this host's user made (`llmload calibrate`) must not change the tests' verdicts.
os.environ["LLMLOAD_CALIBRATION"] = os.path.join(ROOT, ".no-calibration-in-tests.json")


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on right now."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@dataclass
class Mock:
    url: str
    port: int
    log_path: str
    proc: subprocess.Popen
    output: list[str] = field(default_factory=list)

    def log(self, expect: int = 0, timeout: float = 5.0) -> list[dict]:
        """The ground-truth log: one dict per request the server finished. The server writes a
        line just after a response's last bytes leave, so a client can be a moment ahead of it:
        wait (bounded) until there are at least ``expect`` lines."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path) as f:
                entries = [json.loads(line) for line in f if line.strip()]
            if len(entries) >= expect or time.monotonic() >= deadline:
                return entries
            time.sleep(0.05)

    def log_by_id(self, expect: int = 0) -> dict[str, dict]:
        return {e["request_id"]: e for e in self.log(expect)}


def start_mock(tmp_path, *args: str) -> Mock:
    log_path = str(tmp_path / f"mock-{time.monotonic_ns()}.jsonl")
    proc, url = start_mock_process(["--log", log_path, *args], cwd=ROOT)
    return Mock(url=url, port=port_of(url), log_path=log_path, proc=proc)


def stop_mock(mock: Mock) -> None:
    stop_mock_process(mock.proc)


@pytest.fixture
def mock_factory(tmp_path) -> Iterator:
    started: list[Mock] = []

    def factory(*args: str) -> Mock:
        m = start_mock(tmp_path, *args)
        started.append(m)
        return m

    yield factory
    for m in started:
        stop_mock(m)


@pytest.fixture
def fixed_mock(mock_factory) -> Mock:
    """Fixed engine: first token after 40 ms, then one every 4 ms."""
    return mock_factory("--profile", "fixed", "--ttft-ms", "40", "--itl-ms", "4")
