"""The two Locust task bodies that are more than "next request, send it": a trace entry sent at
its trace time, and an agent task's loop of calls. Each runs in a user's greenlet and sends with
the user's :meth:`~llmload.plugin.users.LLMUser.send`.

Sending on time: the user takes its entry as soon as it is free, builds the request (prompt
blocks, JSON body) while there is time, sleeps until a moment before the due time, then yields
until the clock reaches it (libev wakes timers up to a millisecond late; the last
``SPIN_S`` is waited by yielding to the hub, as the mock's driver does). ``scheduled_time`` in the
row is the due time, so ``start_time − scheduled_time`` is the schedule lag.

Usage (what :class:`~llmload.plugin.users.LLMUser` does)::

    replay_one(user, schedule, TraceWorkload(...), rate=8.0)      # one trace entry
    run_agent_task(user, AgentWorkload(...))                      # one whole task
"""

from __future__ import annotations

import time
from typing import Any

import gevent

from llmload.metrics.agent_tasks import TaskTracker, outcome_of
from llmload.workload.agent import AgentWorkload
from llmload.workload.trace.replay import TraceSchedule, TraceWorkload

SPIN_S = 0.002
IDLE_S = 0.5  # a user with nothing left to send waits this long between looks (the run is ending)


def sleep_until(t: float) -> None:
    """Sleep until Unix time ``t``: a timer for most of it, yields for the last ``SPIN_S``."""
    delay = t - time.time()
    if delay > SPIN_S:
        gevent.sleep(delay - SPIN_S)
    while time.time() < t:
        gevent.sleep(0)


def replay_one(user: Any, schedule: TraceSchedule, source: TraceWorkload, rate: float | None) -> None:
    """Send this process's next trace entry at its time; idle when the share is all sent."""
    ticket = schedule.take()
    if ticket is None:
        gevent.sleep(IDLE_S)
        return
    entry, due = ticket
    try:
        request = source.request_for(entry, rate, schedule.turn(entry))
        body = request.encode(user.endpoint_name)
        sleep_until(due)
        user.send_capped(request, due, rate, body)
    finally:
        schedule.finished()


def run_agent_task(user: Any, agent: AgentWorkload) -> None:
    """One task: calls until the model answers without a tool call, ``max_steps`` calls, or a
    failed call; each next call after the tool latency. The task is recorded when it ends (a task
    cut off by the end of the test is not)."""
    request = agent.start_task()
    if request.wait_s > 0:
        gevent.sleep(request.wait_s)  # think time between tasks
    tracker = TaskTracker(request.scenario, request.session_id)
    max_steps = agent.agent.max_steps
    while True:
        rec = user.send_capped(request)
        tracker.add(rec)
        outcome = outcome_of(rec, request.turn or 1, max_steps)
        if outcome is not None:
            break
        nxt = agent.next_call(request, rec.ok, rec.text, rec.tool_calls)
        if nxt is None:  # defensive: next_call ends a task exactly when outcome_of does
            outcome = "answered"
            break
        request = nxt
        if request.wait_s > 0:
            gevent.sleep(request.wait_s)  # the tool runs
    user.plugin.record_task(tracker.finish(outcome))
