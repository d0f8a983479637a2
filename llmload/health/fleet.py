"""The load generator's view of itself over a run: every load-generating process's latest health
sample and in-flight counts, and the run's event-loop stalls summed over processes. Pure (samples
in, state and text out); the plugin feeds it from its own :class:`llmload.health.sampler.ClientHealth`
(local run) or from the workers' reports (master).

Usage::

    view = ClientView()
    view.add("local", sample, in_flight={"chat": 7}, index=0)   # every health sample
    in_flight, health = view.state()                              # for the live view
    view.stalls, view.timing                                      # the run's, every process summed
"""

from __future__ import annotations

from typing import Any

from llmload.health.run_verdict import add_timing, new_timing
from llmload.health.stalls import StallStats


class ClientView:
    def __init__(self) -> None:
        self.processes: dict[str, dict[str, Any]] = {}  # id → {"in_flight", "health", "index"}
        self.stalls = StallStats()  # the whole run, every process
        self.timing = new_timing()  # requests whose timing a stall touched (run_verdict.new_timing), summed
        self._seq = 0

    def add(self, process: str, sample: dict[str, Any], in_flight: dict[str, int], index: int) -> None:
        """One process's health over its last interval (each sample is counted once; ``seq`` tells
        a new sample from one the live history has already judged)."""
        self._seq += 1
        self.processes[process] = {"in_flight": in_flight, "health": {**sample, "seq": self._seq}, "index": index}
        wire = sample.get("stalls")
        if wire:
            self.stalls.merge(StallStats.from_wire(wire))
        add_timing(self.timing, sample.get("timing"))

    def state(self) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """(in-flight requests per scenario, latest health sample per process with its ``worker`` index)."""
        in_flight: dict[str, int] = {}
        for s in self.processes.values():
            for k, v in s["in_flight"].items():
                in_flight[k] = in_flight.get(k, 0) + v
        health = [{**s["health"], "worker": s["index"]} for s in self.processes.values() if s["health"]]
        return in_flight, health
