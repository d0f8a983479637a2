"""A call-graph session in one user (issue 23): every call in a greenlet of its own that waits for
its parents, sleeps its tool or think time, and sends on a connection of the user's that no other
call holds, so a fan-out really runs in parallel. The session is recorded as a task
(:mod:`llmload.metrics.agent_tasks`) when every call has ended.

A call whose parent failed is not sent, and the session's outcome is ``failed``. A test that ends
mid-session kills the calls in flight (their rows say ``cancelled``) and records no task.

Usage (what :class:`~llmload.plugin.users.llm_user.LLMUser` does)::

    pool = ConnectionPool(user.transport, make_another)
    run_graph_session(user, GraphSession(...), pool)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
from gevent.event import Event

from llmload.metrics.agent_tasks import TaskTracker
from llmload.plugin.users.clock import sleep_until
from llmload.workload.tasks.call_graph import CallGraph
from llmload.workload.tasks.graph_session import CallResult, GraphSession

MAX_CONNECTIONS = 64  # per user: a graph wider than this waits for a free connection


class ConnectionPool:
    """The user's own connection first, more made on demand (bounded) for calls that overlap."""

    def __init__(self, first: Any, make: Callable[[], Any], limit: int = MAX_CONNECTIONS) -> None:
        self._idle = [first]
        self._all = [first]
        self._make = make
        self._limit = limit
        self._freed = Event()

    @contextmanager
    def borrow(self) -> Iterator[Any]:
        while not self._idle and len(self._all) >= self._limit:
            self._freed.clear()
            self._freed.wait()
        if self._idle:
            conn = self._idle.pop()
        else:
            conn = self._make()
            self._all.append(conn)
        try:
            yield conn
        finally:
            self._idle.append(conn)
            self._freed.set()

    @property
    def size(self) -> int:
        return len(self._all)

    def close_extra(self) -> None:
        """Close every connection but the user's own (at the user's stop)."""
        for conn in self._all[1:]:
            conn.close()
        self._all = self._all[:1]
        self._idle = list(self._all)


def run_graph_session(user: Any, session: GraphSession, pool: ConnectionPool) -> None:
    graph, think_s = session.start()
    if think_s > 0:
        gevent.sleep(think_s)  # between sessions

    def prepare(call: Any, results: dict[str, CallResult], turn: int) -> tuple[Any, float | None]:
        if call.wait_s > 0:
            gevent.sleep(call.wait_s)  # the tool runs (from the end of the last parent)
        return session.request(call, results, turn), None

    _run_calls(user, graph, TaskTracker(session.spec.name, session.session_id), pool, prepare)


def run_trace_session(user: Any, graph: CallGraph, session_id: str, due: float, source: Any,
                      pool: ConnectionPool, time_scale: float = 1.0) -> None:
    """One session of an agentic trace (:mod:`llmload.workload.trace.graph_trace`): a root is due at
    ``due`` plus its offset, any other call its recorded gap after its last parent ended (both times
    ``time_scale``); each row's ``scheduled_time`` is that due time, so its schedule lag is the
    client's own delay."""

    def prepare(call: Any, results: dict[str, CallResult], turn: int) -> tuple[Any, float | None]:
        start = due if not call.after else time.time()  # the last parent has just ended
        request = source.call_request(call, results, session_id, turn)
        return request, start + call.wait_s * time_scale

    _run_calls(user, graph, TaskTracker(source.spec.name, session_id), pool, prepare)


def _run_calls(user: Any, graph: CallGraph, tracker: TaskTracker, pool: ConnectionPool,
               prepare: Callable[[Any, dict[str, CallResult], int], tuple[Any, float | None]]) -> None:
    """Every call in a greenlet that waits for its parents; ``prepare`` gives its request and its due
    time (None: now). The session is recorded as a task once every call has ended."""
    results: dict[str, CallResult] = {}
    ended = {c.id: Event() for c in graph.calls}
    turn = {c.id: i + 1 for i, c in enumerate(graph.calls)}

    def run(call: Any) -> None:
        try:
            for parent in call.after:
                ended[parent].wait()
            if not all(results[p].ok for p in call.after):
                results[call.id] = CallResult((), "", False)  # not sent: its input never came
                return
            request, due = prepare(call, results, turn[call.id])
            body = request.encode(user.endpoint_name) if due is not None else None  # built while there is time
            with pool.borrow() as conn:
                if due is not None:
                    try:  # a fan-out's new connection is opened before the due time, not inside its lag
                        conn.connect()
                    except OSError:
                        pass  # recorded as connect_error by the request
                    sleep_until(due)
                rec = user.send_capped(request, due, None, body, transport=conn)
            tracker.add(rec)
            results[call.id] = CallResult(tuple(request.messages or ()), rec.text, rec.ok)
        finally:
            ended[call.id].set()

    calls = [gevent.spawn(run, c) for c in graph.calls]
    try:
        gevent.joinall(calls, raise_error=True)
    except BaseException:
        gevent.killall(calls, block=True)  # the test ended (or a call raised): no call outlives its session
        raise
    failed = any(not results.get(c.id, CallResult((), "", False)).ok for c in graph.calls)
    user.plugin.record_task(tracker.finish("failed" if failed else "answered"))
