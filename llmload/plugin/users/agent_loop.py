"""An agent task's loop of calls, in one user's greenlet: each call sent with the user's
:meth:`~llmload.plugin.users.llm_user.LLMUser.send_capped`, the next one after the tool latency, the
task recorded when it ends.

Usage (what :class:`~llmload.plugin.users.llm_user.LLMUser` does)::

    run_agent_task(user, AgentWorkload(...))                      # one whole task
"""

from __future__ import annotations

from typing import Any

import gevent

from llmload.metrics.agent_tasks import TaskTracker, outcome_of
from llmload.workload.tasks.agent import AgentWorkload


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
