"""One worker that floods the master cannot starve the others (issue 35, item 4).

The master's queue (plugin/cluster/ingest_queue.py) is written by its own greenlet, one payload of
each worker in turn. Here a flooder sends ten times the others' messages, each ten times bigger,
more than the master can write (a real gevent loop, the master's per-row cost made real with a
busy wait): its own backlog grows, and the honest workers' rows are still written within a fraction
of a step (0.5 s here; a step is 10 s or more) of arriving.

Time here is the process's CPU time: how much of the master's work passed between a row's arrival and
its writing, which is what fairness decides. Wall time adds whatever the machine did meanwhile (an
honest row's 0.85 s once, with the suite's four processes and a busy loop on 2 cores)."""

from __future__ import annotations

import time

import gevent
import pytest

from llmload.plugin.cluster.ingest_queue import IngestQueue

pytestmark = pytest.mark.unit

ROW_COST_S = 100e-6  # what writing one row costs the master, in CPU (busy: it holds the loop, as the CSV does)
TICK_S = 0.1


def _rows(who: str, n: int, first: int) -> list[list]:
    return [[f"{who}-{first + i}", time.process_time()] for i in range(n)]


def test_a_worker_that_floods_ten_times_the_others_rate_cannot_starve_them():
    waits: dict[str, list[float]] = {"honest-a": [], "honest-b": [], "flooder": []}

    def take(client_id: str, payload: dict) -> None:
        now = time.process_time()
        for row in payload["rows"]:
            waits[client_id].append(now - row[1])
        t_end = time.process_time() + ROW_COST_S * len(payload["rows"])
        while time.process_time() < t_end:
            pass

    queue = IngestQueue(take)
    queue.start()
    sent = dict.fromkeys(waits, 0)

    def worker(who: str, messages_per_tick: int, rows_per_message: int, ticks: int) -> None:
        for _ in range(ticks):
            for _ in range(messages_per_tick):
                queue.put(who, {"rows": _rows(who, rows_per_message, sent[who])})
                sent[who] += rows_per_message
            gevent.sleep(TICK_S)

    # honest: 1 message of 20 rows a tick (200 rows/s each); the flooder: 10 of 200 (20,000 rows/s, 2 s of
    # the master's work per second: twice what it can write)
    ticks = 20
    greenlets = [gevent.spawn(worker, "honest-a", 1, 20, ticks), gevent.spawn(worker, "honest-b", 1, 20, ticks),
                 gevent.spawn(worker, "flooder", 10, 200, ticks)]
    gevent.joinall(greenlets, timeout=30)
    backlog = queue.rows
    assert backlog > 10_000, backlog  # the master really was overrun: the flooder's rows queue up
    gevent.sleep(0.3)
    for who in ("honest-a", "honest-b"):
        assert len(waits[who]) == sent[who] == 20 * ticks, (who, len(waits[who]))
        assert max(waits[who]) < 0.5, (who, max(waits[who]))  # within its step, whatever the flooder sends
    # only the flooder waits behind itself: far longer than either honest worker (0.95 s of CPU once)
    assert max(waits["flooder"]) > 3 * max(max(waits["honest-a"]), max(waits["honest-b"]), 0.05)
    queue.stop()
