"""Each worker's user count over time, as the master hears it: the ``users`` column of a row. Pure.

Only the master knows the total user count, and only from what workers tell it (``llmload_users``);
it passes every worker's count on (``llmload_counts``), so a worker's own file carries the same
totals.

Usage::

    counts = UserCounts()
    counts.report("w1", t=100.0, n=8)
    counts.total_at(101.0, "w2", own=4)    # 12: w2's own count plus w1's at t
"""

from __future__ import annotations

import bisect


class UserCounts:
    """The master's view of each worker's user count over time. Pure.

    ``total_at`` is the row's own worker's count (exact: the worker stamps it) plus every other
    worker's last reported count at the row's start time.
    """

    def __init__(self) -> None:
        self._series: dict[str, tuple[list[float], list[int]]] = {}

    def report(self, worker: str, t: float, n: int) -> None:
        times, counts = self._series.setdefault(worker, ([], []))
        if times and t < times[-1]:  # out of order: keep the series sorted
            i = bisect.bisect_right(times, t)
            times.insert(i, t)
            counts.insert(i, n)
        else:
            times.append(t)
            counts.append(n)

    def total_at(self, t: float, worker: str, own: int | None) -> int:
        total = own or 0
        for client_id, (times, counts) in self._series.items():
            if client_id == worker:
                continue
            i = bisect.bisect_right(times, t) - 1
            if i >= 0:
                total += counts[i]
        return total

    def clear(self) -> None:
        self._series.clear()
