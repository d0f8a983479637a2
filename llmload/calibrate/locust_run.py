"""Run one headless Locust process (``--processes N`` or local) and watch it from outside: its CPU
time every quarter second (the load-generating processes only), when all users were spawned and
when the run time ran out, and its whole CPU at exit. Used by ``llmload calibrate`` and
benchmarks/locust_end_to_end.py.

Usage::

    run = run_locust(locustfile, url, users=256, seconds=30, processes=1, workdir=d, cpus={1})
    run.cpu_at(t)              # CPU-seconds of the load generators at monotonic time t
    run.marks["spawned"], run.whole_cpu_s, run.prefix + "_requests.csv"
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from llmload.net.ports import free_port

LOCUSTFILE = '''
from llmload import LLMUser


class CalibrationUser(LLMUser):
    input_tokens = {input_tokens!r}
    output_tokens = {output_tokens!r}
    ignore_eos = True
'''


def write_locustfile(path: str, input_tokens: str | int, output_tokens: str | int) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write(LOCUSTFILE.format(input_tokens=str(input_tokens), output_tokens=str(output_tokens)))
    return path


def process_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float | None:
    """CPU-seconds every core of the machine spent busy since boot (/proc/stat), steal left out."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:8]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return out


@dataclass
class LocustRun:
    returncode: int
    output: list[str]
    t_launch: float
    marks: dict[str, float]  # monotonic time of "spawned" (all users) and "stop" (run time over)
    samples: list[tuple[float, float]]  # (monotonic time, CPU-seconds of the load-generating processes)
    others: list[tuple[float, float]]  # (monotonic time, CPU-seconds the rest of the machine used)
    whole_cpu_s: float  # every process of the run, start-up and stop included
    prefix: str
    load_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    extra: dict = field(default_factory=dict)

    def cpu_at(self, t: float) -> float:
        """CPU-seconds of the load generators at monotonic time t (linear between samples)."""
        return float(np.interp(t, [s[0] for s in self.samples], [s[1] for s in self.samples]))

    def others_cpu_pct(self, a: float, b: float) -> float | None:
        """Mean CPU of every process but this run's (and ``also``'s) over [a, b], in % of one core."""
        if len(self.others) < 2 or b <= a:
            return None
        times, cpu = [s[0] for s in self.others], [s[1] for s in self.others]
        return max(0.0, float(np.interp(b, times, cpu) - np.interp(a, times, cpu)) / (b - a) * 100.0)

    def line(self, start: str) -> str:
        return next((x.strip() for x in self.output if x.startswith(start)), "")


def locust_command(locustfile: str, url: str, users: int, seconds: float, processes: int, prefix: str,
                   spawn_s: float = 1.0, extra_args: list[str] | None = None) -> list[str]:
    """The headless Locust command of one run; with ``processes`` > 1 on a master port of its own
    (Locust's default 5557 would clash with any other run on the machine)."""
    rate = f"{max(users / max(spawn_s, 1e-3), 1.0):.3f}"
    cmd = [sys.executable, "-m", "locust", "-f", locustfile, "--headless", "-u", str(users), "-r", rate,
           "-t", f"{seconds:g}s", "--host", url, "--csv", prefix, "--stop-timeout", "10", *(extra_args or [])]
    if processes > 1:
        port = str(free_port())
        cmd += ["--processes", str(processes), "--master-bind-port", port, "--master-port", port]
    return cmd


def run_locust(locustfile: str, url: str, users: int, seconds: float, processes: int, workdir: str,
               cpus: set[int] | None = None, extra_args: list[str] | None = None,
               env: dict[str, str] | None = None, name: str = "run", spawn_s: float = 1.0,
               also: tuple[int, ...] = ()) -> LocustRun:
    """One headless run of ``users`` users, started over ``spawn_s`` seconds, for ``seconds``.

    Spread the start over one request's duration for a steady state like a real server's:
    users started together against the fixed-profile mock stay in step, and their requests
    all end in the same few milliseconds. ``also``: processes of ours besides Locust's (the mock),
    left out of the machine's other CPU use."""
    prefix = os.path.join(workdir, name)
    cmd = locust_command(locustfile, url, users, seconds, processes, prefix, spawn_s, extra_args)

    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)

    load_start = os.getloadavg()
    t_launch = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir,
                            env={**os.environ, **(env or {})}, preexec_fn=pin)
    marks: dict[str, float] = {}
    output: list[str] = []

    def read_output() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            if "All users spawned" in line and "spawned" not in marks:
                marks["spawned"] = time.monotonic()
            if "limit reached" in line and "stop" not in marks:
                marks["stop"] = time.monotonic()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    samples = [(t_launch, 0.0)]
    others: list[tuple[float, float]] = []
    others0: float | None = None
    workers: list[int] = []
    deadline = t_launch + seconds + 120
    rusage = None
    while time.monotonic() < deadline:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            rusage = ru
            break
        if processes > 1 and len(workers) < processes:
            workers = _children(proc.pid)
        pids = workers if processes > 1 else [proc.pid]
        now = time.monotonic()
        cpu = [c for c in map(process_cpu_s, pids) if c is not None]
        if cpu:
            samples.append((now, max(sum(cpu), samples[-1][1])))
        ours = sum(c for c in map(process_cpu_s, {proc.pid, *workers, *also}) if c is not None)
        busy = machine_busy_s()
        if busy is not None:
            others0 = busy - ours if others0 is None else others0
            others.append((now, max(busy - ours - others0, others[-1][1] if others else 0.0)))
        time.sleep(0.25)
    else:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"locust did not finish within {seconds + 120:g} s")
    reader.join(5)
    whole = rusage.ru_utime + rusage.ru_stime if rusage is not None else float("nan")
    return LocustRun(proc.returncode, output, t_launch, marks, samples, others, whole, prefix, load_start,
                     os.getloadavg())
