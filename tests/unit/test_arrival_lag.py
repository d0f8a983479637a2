"""A master past its capacity says so even when the backlog waits in ZeroMQ's buffers, not in its own
queue (issue 35, item 3): at 100,000 rows/s from 16 light workers it took 70,000 a second, wrote
every row, and never printed its "behind" line. The rows' own times tell how late they come."""

from __future__ import annotations

import logging

import pytest

from llmload.files import COL, REQUESTS_COLUMNS
from llmload.plugin.cluster.ingest_queue import ArrivalLag, IngestQueue


def row(start: float, e2e_ms: float | None = 1000.0) -> list:
    cells: list = [None] * len(REQUESTS_COLUMNS)
    cells[COL.request_id], cells[COL.start_time], cells[COL.e2e_ms] = f"r{start}", start, e2e_ms
    return cells


def test_each_workers_least_lateness_is_its_baseline_and_the_rest_is_lag():
    lag = ArrivalLag()
    # worker a's clock runs 3 s behind the master's, b's 0.2 s ahead; rows shipped 0.5 s after they end
    assert lag.seen("a", row(100.0), 104.5) == 0.0  # ended at 101 (a's clock): 3.5 s late, its baseline
    assert lag.seen("b", row(200.0), 200.3) == 0.0  # a negative lateness is a baseline too
    assert lag.seen("a", row(110.0), 114.2) == 0.0  # sooner than before: the new baseline (3.2 s)
    assert lag.seen("a", row(120.0), 131.2) == pytest.approx(7.0)  # 7 s beyond it: waited unread
    assert lag.last_s == pytest.approx(7.0)
    # no E2E (a failed row): its start is its end, here read as soon after it as b's rows always are
    assert lag.seen("b", row(300.0, None), 299.3) == pytest.approx(0.0)
    assert lag.seen("b", ["too", "short"], 999.0) == 0.0 and lag.last_s == 0.0  # no times: nothing read
    assert lag.seen("b", row(float("nan")), 999.0) == 0.0


def test_the_queue_says_it_is_behind_when_rows_come_late_though_none_waits_in_it(caplog):
    clock, wall = [0.0], [1000.0]
    written: list[str] = []
    queue = IngestQueue(lambda client, payload: written.extend(r[0] for r in payload["rows"]),
                        clock=lambda: clock[0], wall=lambda: wall[0])
    caplog.set_level(logging.WARNING, logger="llmload")
    for i in range(10):  # one payload every 0.5 s, each written at once: the queue never holds one
        wall[0] += 0.5 + (0.8 * i if i >= 3 else 0.0)  # from the 4th on, each comes 0.8 s later than the last
        clock[0] += 0.5
        queue.put("w1", {"rows": [row(wall[0] - 1.5 - (0.8 * i if i >= 3 else 0.0))]})
        queue.flush() if i == 9 else (queue.drain(), queue._check_behind())
    said = [r.getMessage() for r in caplog.records]
    behind = [m for m in said if "is behind its workers" in m]
    assert len(behind) == 1 and "rows reach it 6 s later than they used to" in behind[0], said
    assert "0 rows from 0 workers wait to be written" in behind[0] and "none is dropped" in behind[0]
    assert any("has caught up with its workers" in m for m in said), said  # everything written at the flush
    assert len(written) == 10 and queue.arrival.last_s == 0.0  # nothing late is left unwritten
    queue._check_behind()  # the writer's next look after the flush: not behind again
    assert len([r for r in caplog.records if "is behind" in r.getMessage()]) == 1
