"""A measured verdict read a second time when the host explains the first.

Some checks judge a measurement (a sweep's answer, a step's precision, a router's random pins) that a
host busy beside the suite can move without any bug of llmload's. Such a test measures once more, in a
new directory, when the first reading is off for that reason, and says so in its output; a bug of the
code's shows in both readings, and the test's assertions then judge the second.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def measured_twice(tmp_path: Path, measure: Callable[[Path], T], off: Callable[[T], str | None]) -> tuple[T, Path]:
    """``measure(directory)`` in ``tmp_path/run1``; when ``off(reading)`` names why that reading is off,
    once more in ``tmp_path/run2``. Returns the reading the test then judges, and its directory."""
    work = tmp_path / "run1"
    work.mkdir()
    reading = measure(work)
    why = off(reading)
    if why is None:
        return reading, work
    print(f"the first reading is off ({why}): once more")
    work = tmp_path / "run2"
    work.mkdir()
    return measure(work), work
