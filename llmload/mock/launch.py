"""Start `llmload mock` in a child process and learn its address (demo, benchmarks, tests)."""

from __future__ import annotations

import os
import subprocess
import sys


def start_mock_process(args: list[str], cpu: int | None = None, cwd: str | None = None,
                       quiet: bool = True) -> tuple[subprocess.Popen, str]:
    """Run ``llmload mock --port 0 ARGS`` (pinned to ``cpu`` when there are several) and return
    the process and its ``http://host:port`` once it listens. Stop it with :func:`stop_mock_process`."""
    cmd = [sys.executable, "-m", "llmload.cli", "mock", "--port", "0", *args]
    if cpu is not None and (os.cpu_count() or 1) > 1:
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if quiet else None, text=True,
                            cwd=cwd)
    line = proc.stdout.readline() if proc.stdout else ""
    if "listening on" not in line:
        proc.kill()
        rest = proc.stdout.read() if proc.stdout else ""
        raise RuntimeError(f"llmload mock did not start: {(line + rest).strip()}")
    return proc, line.rsplit(" ", 1)[1].strip()


def stop_mock_process(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """Ask the mock to stop (SIGTERM: it closes its log and exits), kill it if it does not."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])
