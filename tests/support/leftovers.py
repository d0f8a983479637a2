"""Which processes the test suite started, and which of them are still alive.

Every process a test starts inherits two marks in its environment (set in tests/conftest.py):
``LLMLOAD_TEST_RUN`` names the whole ``make test`` (or ``pytest``) run, ``LLMLOAD_TEST_NODE`` the test
that is running. A process keeps the environment it was started with, so a mock, a Locust master,
its forked workers or a llama-server carry the marks even after their parent died and they were
re-parented to init. A test that builds its environment from scratch loses them; for it, the
processes descending from the test process that were not there when the test began count too.

Usage::

    before = descendants(os.getpid())
    ...                                   # the test
    left = alive_after(marked("LLMLOAD_TEST_NODE", token) | (descendants(os.getpid()) - before), 10.0)
    kill(left)                            # SIGKILL; ``describe(left)`` says what they were
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Iterable

RUN_VAR = "LLMLOAD_TEST_RUN"
NODE_VAR = "LLMLOAD_TEST_NODE"


def _pids_file() -> str:
    return os.path.join(tempfile.gettempdir(), f"llmload-test-run-{os.environ[RUN_VAR]}.pids")


def note_test_process() -> None:
    """Note this pytest process (one per xdist worker and tier) as one of the run's."""
    with open(_pids_file(), "a") as f:
        f.write(f"{os.getpid()}\n")


def test_processes() -> set[int]:
    """The pids of every pytest process of this run so far."""
    try:
        with open(_pids_file()) as f:
            return {int(line) for line in f if line.strip()}
    except FileNotFoundError:
        return set()


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()  # the command name in () may hold spaces
    return fields[0].decode(), int(fields[1])


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has ended: it only waits for its parent to reap it)."""
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def marked(var: str, value: str) -> set[int]:
    """Running processes whose environment has ``var=value`` (this process excluded)."""
    needle = f"{var}={value}".encode()
    me, out = os.getpid(), set()
    for pid in _pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if needle in env and running(pid):
            out.add(pid)
    return out


def descendants(root: int) -> set[int]:
    """The running processes below ``root`` in the process tree."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            children.setdefault(st[1], []).append(pid)
    out, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it (the test runner, make, the shell)."""
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        st = _stat(pid)
        if st is None:
            break
        pid = st[1]
    return out


def alive_after(pids: Iterable[int], grace_s: float) -> set[int]:
    """Those of ``pids`` still running after up to ``grace_s`` seconds (a process that was asked to
    stop may take a moment to exit); returns at once when none is."""
    pids = set(pids)
    deadline = time.monotonic() + grace_s
    while True:
        pids = {p for p in pids if running(p)}
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.1)


def describe(pids: Iterable[int]) -> list[str]:
    out = []
    for pid in sorted(pids):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "(gone)"
        out.append(f"pid {pid}: {cmd[:300]}")
    return out


def kill(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
