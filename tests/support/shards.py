"""Several pytest processes sharing one list of tests: each runs the next one that no other took.

``scripts/test_suite.py`` starts N processes with ``-p tests.support.shards`` and ``LLMLOAD_SHARDS``
set to a directory they share. Each collects the same tests in the same order (tests/conftest.py
sorts them), and runs a unit of work only once it has claimed it: a claim is a file created with
``O_EXCL``, so exactly one process gets each. A unit is one test, or every test of one shared
server's group (``SHARED_SERVER``, tests/conftest.py): those run in one process, one after another,
against one server. A unit that needs a build or install still going beside the tests (its
``prepared_by`` marker; ``LLMLOAD_PREPARED``) is taken only once that has ended.

Why not pytest-xdist: its worker talks to the controller through a thread and ``threading``
primitives, and the tests' process is monkey-patched by gevent (tests/conftest.py; Locust patches
every process that imports it), which turns those into greenlet primitives the thread cannot wake:
the worker dies with ``LoopExit: This operation would block forever``. Here every process is a
plain pytest session, patched as before.

Each process appends one JSON line per finished test phase worth reporting to ``results.jsonl`` (the
runner prints failures as they happen and checks that every test ran), and the first to finish
collecting writes the list of tests to ``tests.json``.

Usage::

    LLMLOAD_SHARDS=/tmp/run/side python -m pytest -p tests.support.shards -q   # in N processes at once
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator

import pytest

DIR_VAR = "LLMLOAD_SHARDS"
INDEX_VAR = "LLMLOAD_SHARD_INDEX"
PREPARED_VAR = "LLMLOAD_PREPARED"
"""A directory where scripts/test_suite.py keeps ``NAME.pending`` for each build or install it runs
beside the tests, and ``NAME.done`` once that has ended (whatever its exit code)."""


def _dir() -> str | None:
    return os.environ.get(DIR_VAR) or None


def units(items: list) -> list[list]:
    """Consecutive tests of one shared server's group make one unit; every other test is its own."""
    out: list[list] = []
    last = None
    for item in items:
        mark = item.get_closest_marker("shared")
        group = mark.args[0] if mark else None
        if group is not None and group == last:
            out[-1].append(item)
        else:
            out.append([item])
        last = group
    return out


def ready(unit: list) -> bool:
    """Whether no preparation this unit needs is still going (a test then waits on its lock)."""
    directory = os.environ.get(PREPARED_VAR)
    mark = unit[0].get_closest_marker("prepared_by")
    if not directory or mark is None:
        return True
    name = mark.args[0]
    return not os.path.exists(os.path.join(directory, f"{name}.pending")) or \
        os.path.exists(os.path.join(directory, f"{name}.done"))


def claim_order(work: list[list], is_ready: Callable[[list], bool],
                is_taken: Callable[[int], bool]) -> Iterator[tuple[int, list]]:
    """The units to try to claim, with their numbers: in the collection's order, except that a unit
    whose build or install is still going is left for later, tried first once ``is_ready`` says it
    has ended, and tried anyway when nothing else is left (its tests then wait on its lock). Never
    waits itself: the loop below asks for the next test before it runs this one. A unit
    ``is_taken`` (another process claimed it) is dropped."""
    queue, deferred = iter(enumerate(work)), []
    while True:
        deferred = [d for d in deferred if not is_taken(d[0])]
        now = next((d for d in deferred if is_ready(d[1])), None)
        if now is None:
            now = next(queue, None)
            if now is None:
                if not deferred:
                    return
                now = deferred[0]
            elif not is_ready(now[1]):
                deferred.append(now)
                continue
        deferred = [d for d in deferred if d[0] != now[0]]
        yield now


def _claim(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def _same_collection(directory: str, nodeids: list[str]) -> None:
    """The first process to get here writes the list; every other must have collected the same."""
    signature = hashlib.sha256("\n".join(nodeids).encode()).hexdigest()
    path = os.path.join(directory, "tests.json")
    if _claim(path + ".lock"):
        with open(path + ".tmp", "w") as f:
            json.dump({"signature": signature, "tests": nodeids}, f)
        os.replace(path + ".tmp", path)
        return
    for _ in range(600):  # the first one is writing it: wait, bounded
        if os.path.exists(path):
            break
        time.sleep(0.1)
    with open(path) as f:
        theirs = json.load(f)["signature"]
    if theirs != signature:
        raise pytest.UsageError(f"this process collected other tests than the first one ({DIR_VAR}={directory}); "
                                "tests must collect the same everywhere")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session) -> bool | None:
    directory = _dir()
    if directory is None or session.config.option.collectonly:
        return None  # pytest's own loop
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
    os.makedirs(os.path.join(directory, "claims"), exist_ok=True)
    _same_collection(directory, [item.nodeid for item in session.items])
    work = units(session.items)

    def claim_path(n: int) -> str:
        return os.path.join(directory, "claims", str(n))

    def claimed():
        for n, unit in claim_order(work, ready, lambda n: os.path.exists(claim_path(n))):
            if _claim(claim_path(n)):
                yield from unit

    # The next test is claimed before this one runs: pytest tears down after each test what the next
    # does not need, so it must know which test comes next here.
    tests = claimed()
    item = next(tests, None)
    while item is not None:
        nextitem = next(tests, None)
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)
        item = nextitem
    return True


def pytest_runtest_logreport(report) -> None:
    directory = _dir()
    if directory is None:
        return
    if report.when != "call" and report.outcome == "passed":
        return  # a setup or teardown that passed says nothing; the call's line says how the test went
    said = ""
    if report.failed:  # the failure's first E line (its assertion), else its last line
        text = report.longreprtext.strip().splitlines() or [""]
        said = next((t for t in text if t.startswith("E ")), text[-1])[:300]
    line = json.dumps({"test": report.nodeid, "when": report.when, "outcome": report.outcome,
                       "seconds": round(report.duration, 3), "shard": os.environ.get(INDEX_VAR, "?"),
                       "said": said})
    with open(os.path.join(directory, "results.jsonl"), "a") as f:  # one short append: whole lines
        f.write(line + "\n")
