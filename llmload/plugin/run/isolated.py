"""Steps that must not take each other down: the end of a run (rows, llm_stats, history, the
manifest's end, the summary, the scraper) and its start (files, health, scraper). One that fails is
named in one line; the others still run (issue 19, row 8).

Usage::

    failed = run_each("the end of the run", [("PREFIX_llm_stats.csv", write_stats), ("the summary", say)])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

log = logging.getLogger("llmload")


def run_each(what: str, steps: Iterable[tuple[str, Callable[[], object]]]) -> list[str]:
    """Run every step in order; the names of those that raised."""
    failed = []
    for name, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - any failure of one step: said, and the next step runs
            log.error("llmload: %s: %s failed (%s: %s); the other steps ran", what, name, type(e).__name__, e)
            failed.append(name)
    return failed
