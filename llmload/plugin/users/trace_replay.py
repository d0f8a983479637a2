"""Trace replay across processes: one clock for all of them, each trace entry sent at its time,
and the end of the run when every process has sent its share.

* Trace time 0 is one Unix time for every process: at test start the process that leads the run
  (the master, or the local process) takes ``now + LEAD_S`` plus the time Locust takes to spawn
  the users (users ÷ spawn rate, at most ``MAX_SPAWN_WAIT_S``), and sends it
  (``messages.TRACE_T0``; a local process's role loops it back). Locust fires ``test_start`` on
  the master before it sends the spawn messages, and messages reach a worker in order; but Locust
  connects a worker to its master before the ``init`` event that makes llmload's handlers, so a
  master that starts at once can send ``t0`` to a worker not yet listening (Locust drops it:
  "Unknown message type"). A worker whose first user finds no ``t0`` asks again
  (``messages.TRACE_T0_ASK``) and waits for it, ``T0_WAIT_S`` at most, before it starts its share
  on a clock of its own (with a warning: its requests would then be off the others' by the gap).
* Each process deals itself its share (:class:`~llmload.workload.trace.replay.TraceSchedule`, from
  the role's ``worker_index`` and ``processes``). When every schedule of a process has handed out
  and recorded its share, it says so (``messages.TRACE_DONE``); when every load-generating
  process has, the run ends: a headless run quits, a web UI run stops, as Locust does when a
  load shape ends.
* Sending on time (:func:`replay_one`): the user takes its entry as soon as it is free, builds the
  request (prompt blocks, JSON body) while there is time, sleeps until a moment before the due
  time, then yields until the clock reaches it (libev wakes timers up to a millisecond late; the
  last ``SPIN_S`` is waited by yielding to the hub, as the mock's driver does). ``scheduled_time``
  in the row is the due time, so ``start_time − scheduled_time`` is the schedule lag.
* An agentic trace's entry is a whole session (:func:`~llmload.plugin.users.graph_loop.run_trace_session`):
  its roots are due at the entry's time plus their offset, every other call its recorded gap
  after its last parent ended.

Usage (the plugin makes one link per process; LLMUser calls replay_one)::

    link = ReplayLink(environment, role)
    schedule = link.schedule_for("mooncake", selected_trace(spec.trace))
    replay_one(user, schedule, TraceWorkload(...), rate=8.0)
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
import gevent.event

from llmload.plugin.cluster.messages import PROTOCOL_VERSION, TRACE_DONE, TRACE_T0, TRACE_T0_ASK
from llmload.plugin.cluster.role import Role
from llmload.plugin.users.clock import sleep_until
from llmload.plugin.users.graph_loop import ConnectionPool, run_trace_session
from llmload.workload.trace.replay import SelectedTrace, TraceSchedule, TraceWorkload

log = logging.getLogger("llmload")

LEAD_S = 1.0
"""From the last user's spawn to trace time 0: time to connect and take the first entries."""
MAX_SPAWN_WAIT_S = 10.0
T0_WAIT_S = 5.0
"""How long a worker's first user waits for the master's t0 after asking for it again."""


IDLE_S = 0.5  # a user with nothing left to send waits this long between looks (the run is ending)


class ReplayLink:
    def __init__(self, environment: Any, role: Role) -> None:
        self.env = environment
        self.role = role
        self.t0: float | None = None
        self._t0_known = gevent.event.Event()
        self._asked = False
        self.schedules: dict[str, TraceSchedule] = {}
        self._done: set[str] = set()
        self._reported = False
        self._ended = False
        environment.events.test_start.add_listener(self._on_test_start)
        role.handle(TRACE_T0, lambda data, _node_id: self._set_t0(data["t0"]))
        role.handle(TRACE_DONE, self._on_done)
        # the leader answers a worker that asks again (any worker may: the answer is what all were sent)
        role.handle(TRACE_T0_ASK, lambda _data, _node_id: self._send_t0())

    def _set_t0(self, t0: float) -> None:
        self.t0 = float(t0)
        self._t0_known.set()

    def _send_t0(self) -> None:
        if self.role.leads and self.t0 is not None:
            self.role.send(TRACE_T0, TRACE_T0.payload(t0=self.t0))

    def _on_test_start(self, environment: Any, **_kw: Any) -> None:
        self.schedules = {}
        self._done = set()
        self._reported = False
        self._ended = False
        if self.role.leads:  # elsewhere the leader's t0 arrives before the spawn message (or on asking)
            self._set_t0(time.time() + self._lead_s())
            self._send_t0()

    def _lead_s(self) -> float:
        env = self.env
        opts = env.parsed_options
        users = getattr(env.runner, "target_user_count", None) or getattr(opts, "num_users", None) or 0
        rate = getattr(env.runner, "spawn_rate", None) or getattr(opts, "spawn_rate", None) or 0
        spawn_s = users / rate if users and rate else 0.0
        return LEAD_S + min(spawn_s, MAX_SPAWN_WAIT_S)

    def schedule_for(self, name: str, trace: SelectedTrace) -> TraceSchedule:
        """This process's schedule of a trace workload (one per workload and test)."""
        s = self.schedules.get(name)
        if s is None:
            if self.t0 is None and not self.role.leads:  # the master's t0 came before this worker listened
                if not self._asked:
                    self._asked = True
                    token = getattr(self.role, "token", "")  # a worker's --cluster-token (read once, by its role)
                    self.role.send(TRACE_T0_ASK, TRACE_T0_ASK.payload(token=token, version=PROTOCOL_VERSION))
                self._t0_known.wait(T0_WAIT_S)
            if self.t0 is None:  # no answer (a master of an older llmload), or a hand-built run
                log.warning("llmload: no trace start time from the master; this process starts its share now")
                self._set_t0(time.time() + LEAD_S)
            role = self.role
            s = self.schedules[name] = TraceSchedule(trace, role.worker_index, role.processes, self.t0,
                                                     on_done=self._check_done)
        return s

    def _check_done(self) -> None:
        if self._reported or not all(s.done for s in self.schedules.values()):
            return
        self._reported = True
        self.role.send(TRACE_DONE, TRACE_DONE.payload(index=self.role.worker_index, token=self.role.token,
                                                      version=PROTOCOL_VERSION))

    def _on_done(self, _data: Any, node_id: str) -> None:
        self._done.add(node_id)
        expected = self.role.load_processes()
        if expected and expected <= self._done and not self._ended:
            self._ended = True
            log.info("llmload: every trace request is sent%s; ending the run", self.role.processes_note(expected))
            self.role.end_run()


def replay_one(user: Any, schedule: TraceSchedule, source: TraceWorkload, rate: float | None,
               pool: ConnectionPool | None = None) -> None:
    """Send this process's next trace entry at its time (an agentic trace's: run its session from
    then); idle when the share is all sent."""
    ticket = schedule.take()
    if ticket is None:
        gevent.sleep(IDLE_S)
        return
    entry, due = ticket
    if entry.graph is not None:
        assert pool is not None
        try:
            n = schedule.turn(entry) or 1  # the same session again (loop:): a session id of its own
            sid = entry.session_id if n == 1 else f"{entry.session_id}~{n}"
            run_trace_session(user, entry.graph, sid, due, source, pool, schedule.scale)
        finally:
            schedule.finished()
        return
    try:
        request = source.request_for(entry, rate, schedule.turn(entry))
        body = request.encode(user.endpoint_name)
        sleep_until(due)
        user.send_capped(request, due, rate, body)
    finally:
        schedule.finished()
