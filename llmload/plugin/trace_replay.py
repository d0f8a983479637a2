"""Trace replay across processes: one clock for all of them, and the end of the run when every
process has sent its share.

* Trace time 0 is one Unix time for every process: at test start the master (or the local
  process) takes ``now + LEAD_S`` plus the time Locust takes to spawn the users (users ÷ spawn
  rate, at most ``MAX_SPAWN_WAIT_S``), and sends it to the workers (``llmload_trace_t0``). Locust
  fires ``test_start`` on the master before it sends the spawn messages, and messages reach a
  worker in order, so every user knows ``t0`` when it starts.
* Each process deals itself its share (:class:`~llmload.workload.trace.replay.TraceSchedule`, from
  ``plugin.worker_index`` and ``plugin.processes``). When every schedule of a process has
  handed out and recorded its share, a worker tells the master (``llmload_trace_done``); when
  every worker has (or at once, in a local run) the run ends: a headless run quits, a web UI
  run stops, as Locust does when a load shape ends.

Usage (the plugin makes one per process)::

    link = ReplayLink(plugin)
    schedule = link.schedule_for("mooncake", selected_trace(spec.trace))
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent

from llmload.workload.trace.replay import SelectedTrace, TraceSchedule

log = logging.getLogger("llmload")

LEAD_S = 1.0
"""From the last user's spawn to trace time 0: time to connect and take the first entries."""
MAX_SPAWN_WAIT_S = 10.0


class ReplayLink:
    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin
        self.t0: float | None = None
        self.schedules: dict[str, TraceSchedule] = {}
        self._done_workers: set[str] = set()
        self._reported = False
        self._ended = False
        env = plugin.env
        env.events.test_start.add_listener(self._on_test_start)
        runner = env.runner
        if plugin.mode == "worker":
            runner.register_message("llmload_trace_t0", lambda environment, msg, **_kw: self._set_t0(msg.data["t0"]))
        elif plugin.mode == "master":
            runner.register_message("llmload_trace_done", self._on_worker_done)

    def _set_t0(self, t0: float) -> None:
        self.t0 = float(t0)

    def _on_test_start(self, environment: Any, **_kw: Any) -> None:
        self.schedules = {}
        self._done_workers = set()
        self._reported = False
        self._ended = False
        if self.plugin.mode == "worker":
            return  # the master's t0 arrives before the spawn message
        self.t0 = time.time() + self._lead_s()
        link = self.plugin.link
        if self.plugin.mode == "master" and link is not None:
            link.broadcast("llmload_trace_t0", {"t0": self.t0})

    def _lead_s(self) -> float:
        env = self.plugin.env
        opts = env.parsed_options
        users = getattr(env.runner, "target_user_count", None) or getattr(opts, "num_users", None) or 0
        rate = getattr(env.runner, "spawn_rate", None) or getattr(opts, "spawn_rate", None) or 0
        spawn_s = users / rate if users and rate else 0.0
        return LEAD_S + min(spawn_s, MAX_SPAWN_WAIT_S)

    def schedule_for(self, name: str, trace: SelectedTrace) -> TraceSchedule:
        """This process's schedule of a trace workload (one per workload and test)."""
        s = self.schedules.get(name)
        if s is None:
            if self.t0 is None:  # a worker that missed the master's clock (or a hand-built run)
                log.warning("llmload: no trace start time from the master; this process starts its share now")
                self.t0 = time.time() + LEAD_S
            plugin = self.plugin
            s = self.schedules[name] = TraceSchedule(trace, plugin.worker_index, max(1, plugin.processes), self.t0,
                                                     on_done=self._check_done)
        return s

    def _check_done(self) -> None:
        if self._reported or not all(s.done for s in self.schedules.values()):
            return
        self._reported = True
        if self.plugin.mode == "worker":
            self.plugin.env.runner.send_message("llmload_trace_done", {"index": self.plugin.worker_index})
        else:
            self._end_run("every trace request is sent")

    def _on_worker_done(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self._done_workers.add(msg.node_id)
        link = self.plugin.link
        expected = set(getattr(link, "expected", ()) or ())
        if expected and expected <= self._done_workers:
            self._end_run(f"every trace request is sent ({len(expected)} worker processes)")

    def _end_run(self, why: str) -> None:
        if self._ended:
            return
        self._ended = True
        runner = self.plugin.env.runner
        if runner is None:
            return
        opts = self.plugin.env.parsed_options
        log.info("llmload: %s; ending the run", why)
        gevent.spawn(runner.quit if opts is not None and opts.headless else runner.stop)
