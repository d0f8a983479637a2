"""Is the machine busy? CPU steal, run queue and other processes' CPU on the cores this process
may use, read from ``/proc`` (Linux; elsewhere every figure is None). The parsers are pure.

Used by :mod:`llmload.health.sampler` to tell "this process is busy" (add processes) from "the machine is
busy" (free it): a process starved by a neighbour shows low CPU and a long event-loop lag, just
as one with too little work would not.

Usage::

    m = MachineSampler(); m.start()
    m.tick()     # every health tick: samples the run queue
    m.take(own_cpu_pct=37.5)
    # -> {"cores": 2, "steal_pct": 0.0, "others_cpu": 41.0, "run_queue": 1.2, "load1": 2.9}
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

PROC_STAT = "/proc/stat"
PROC_LOADAVG = "/proc/loadavg"


@dataclass(frozen=True)
class CpuTimes:
    """Jiffies of one ``cpuN`` line of /proc/stat (guest time is already inside user)."""

    busy: int  # user + nice + system + irq + softirq
    idle: int  # idle + iowait
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.busy - other.busy, self.idle - other.idle, self.steal - other.steal)


def parse_proc_stat(text: str) -> dict[int, CpuTimes]:
    """Per-core times from /proc/stat (the ``cpuN`` lines; the aggregate ``cpu`` line is skipped)."""
    out: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        v = [int(x) for x in fields[:8]] + [0] * (8 - len(fields[:8]))
        user, nice, system, idle, iowait, irq, softirq, steal = v
        out[int(name[3:])] = CpuTimes(user + nice + system + irq + softirq, idle + iowait, steal)
    return out


def parse_loadavg(text: str) -> tuple[float, int]:
    """(1-minute load average, runnable tasks now, this reader included) from /proc/loadavg."""
    fields = text.split()
    return float(fields[0]), int(fields[3].split("/")[0])


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return None


def own_cores() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


class MachineSampler:
    """Deltas of /proc/stat over the cores this process may run on, and the mean run queue."""

    def __init__(self) -> None:
        self._stat0: dict[int, CpuTimes] | None = None
        self._runnable: list[int] = []
        self.cores = own_cores()
        self.machine_cores = os.cpu_count() or len(self.cores)

    def start(self) -> None:
        self.cores = own_cores()
        text = _read(PROC_STAT)
        self._stat0 = parse_proc_stat(text) if text else None
        self._runnable = []

    def tick(self) -> None:
        text = _read(PROC_LOADAVG)
        if text:
            self._runnable.append(parse_loadavg(text)[1] - 1)  # not counting this process's own read
            if len(self._runnable) > 10_000:
                del self._runnable[:5_000]

    def take(self, own_cpu_pct: float) -> dict[str, Any]:
        """Since the last call: steal and other processes' CPU on this process's cores (in % of one
        core, like ``own_cpu_pct``), the mean run queue and the load average."""
        out: dict[str, Any] = {"cores": len(self.cores), "machine_cores": self.machine_cores, "steal_pct": None,
                               "others_cpu": None, "run_queue": None, "load1": None}
        text = _read(PROC_STAT)
        stat1 = parse_proc_stat(text) if text else None
        if stat1 is not None and self._stat0 is not None:
            d = [stat1[c] - self._stat0[c] for c in self.cores if c in stat1 and c in self._stat0]
            total = sum(x.total for x in d)
            if total > 0:
                busy_pct = sum(x.busy for x in d) / total * 100.0 * len(d)  # % of one core
                out["steal_pct"] = round(sum(x.steal for x in d) / total * 100.0, 1)  # % of these cores' time
                out["others_cpu"] = round(max(0.0, busy_pct - own_cpu_pct), 1)
        self._stat0 = stat1
        if self._runnable:
            out["run_queue"] = round(sum(self._runnable) / len(self._runnable), 2)
            self._runnable = []
        load = _read(PROC_LOADAVG)
        if load:
            out["load1"] = parse_loadavg(load)[0]
        return out
