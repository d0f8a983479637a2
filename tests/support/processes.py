"""The project root, free ports, and `llmload mock` in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field

from llmload.mock.launch import port_of, start_mock_process, stop_mock_process

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_handed_out: set[int] = set()


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on right now, for a process that must be told its port
    before it starts (port 0 wherever the server can say which it got). Never the same twice in one
    process, and with the suite's tests side by side (tests/support/shards.py) each process takes only
    ports of its own residue: two tests at once never get the same port between its pick and its bind."""
    import socket

    index = int(os.environ.get("LLMLOAD_SHARD_INDEX") or 0)
    count = max(1, int(os.environ.get("LLMLOAD_SHARD_COUNT") or 1))
    for _ in range(10_000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if (port >> 1) % count == index % count and port not in _handed_out:  # the kernel favours odd ports
            _handed_out.add(port)
            return port
    raise RuntimeError("no free port of 127.0.0.1 found")


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


def raise_priority(pid: int = 0) -> None:
    """Timing tests measure the client, not the machine's scheduler: the processes they time run
    at nice -10 where allowed (root), so a busy neighbour on a 2-core machine does not preempt
    them for a whole time slice. Without the right it is a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, -10)
    except OSError:
        pass


def raise_tree_priority(pid: int) -> None:
    """:func:`raise_priority` for every thread of ``pid`` and of its descendants (a nice value is a
    thread's own: an engine computes and answers from threads and child processes of its own)."""
    import psutil  # Locust's dependency

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        try:
            threads = [t.id for t in proc.threads()]
        except psutil.Error:
            continue
        for tid in threads:
            raise_priority(tid)


def start_mock(tmp_path, *args: str) -> Mock:
    log_path = str(tmp_path / f"mock-{time.monotonic_ns()}.jsonl")
    proc, url = start_mock_process(["--log", log_path, *args], cwd=ROOT)
    return Mock(url=url, port=port_of(url), log_path=log_path, proc=proc)


def stop_mock(mock: Mock) -> None:
    stop_mock_process(mock.proc)


def end_process(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not ended within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
