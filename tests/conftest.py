"""The test suite's tiers, and what every test gets (docs/architecture.md, "The test suite").

Where a new test goes: its folder gives its marker, and the marker its tier.

========  ====================================  ==============================================
marker    what                                  how it runs (``make test``: scripts/test_suite.py)
========  ====================================  ==============================================
unit      tests/unit/: pure logic, no process   side by side (tests/support/shards.py)
e2e       tests/e2e/: real Locust runs against  side by side: they wait for load steps, and
          the mock, subprocesses, sockets       hold only bounds that a bug breaks, never one
                                                that a busy neighbour does
real      tests/real/: llama.cpp, vLLM,         side by side; the tests of one shared server
          Chromium, network namespaces          run on one worker, one after another
timing    any folder, set by hand               alone, after the others: a bound that needs a
          (``pytestmark = pytest.mark.timing``)  core of its own (64 streams timed to the ms)
last      tests/test_leftovers.py               at the very end: no process left behind
========  ====================================  ==============================================

The rules:

* A test holds on a busy machine (one core taken by a busy loop) or it is not a test. A figure that
  needs a quiet machine is a benchmark (``benchmarks/``, its number in docs/benchmarks.md); the
  test keeps a bound that only a bug breaks. Mark ``timing`` only what still needs a core of its own
  to hold even that bound; it costs wall time, since that tier runs one test at a time.
* Servers that tests only read are shared per session: a fixture module in tests/support/ whose
  session fixtures start one sets ``SHARED_SERVER = "name"`` (llamacpp.py: ``"llama"``); every test
  that uses one of its fixtures gets marker ``shared(name)``, so the whole group runs in one process
  against one server, after the wait for its build or install. Such a module must not be needed by
  a ``timing`` test (the server would start twice). Its ``PREPARED_BY = "name"`` (or a test's
  ``prepared_by(name)`` marker) names the build or install of ``make test`` it needs: side by side,
  no process takes such a test until that preparation has ended, so none sits waiting on a compile
  while other tests are left to run.
* No fixed port: port 0 where the server can report its port (the mock, llama-server), else
  :func:`tests.support.processes.free_port`.
* No process left behind: every process a test starts carries the test's mark
  (:mod:`tests.support.leftovers`); one still alive 10 s after the test ends is killed (and fails a
  test that passed: it would leave it on every run), and tests/test_leftovers.py fails if anything
  the run started is alive at the end.

Shared fixtures: a live ``llmload mock`` in its own process, on a free port of 127.0.0.1.

The test process is monkey-patched by gevent up front, as Locust does to every process that
imports it: some tests import Locust, and a process half patched mid-run misbehaves.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from tests.support import leftovers, shards  # noqa: E402
from tests.support import vllm as vllm_support  # noqa: E402
from tests.support.processes import ROOT, Mock, start_mock, stop_mock  # noqa: E402
from tests.support.vllm import order_key as vllm_order_key  # noqa: E402
from tests.support.vllm import vllm_server_fixture  # noqa: E402, F401  (one for the session: defined here)

TESTS = os.path.dirname(os.path.abspath(__file__))
FOLDER_MARKERS = ("unit", "e2e", "real", "fuzz")
LEFT_GRACE_S = 10.0  # a process asked to stop at the test's end may take this long to exit

# A calibration this host's user made (`llmload calibrate`) must not change the tests' verdicts.
os.environ["LLMLOAD_CALIBRATION"] = os.path.join(ROOT, ".no-calibration-in-tests.json")
# ... nor may a test's sweep or report add runs to the user's archive (~/.local/share/llmload).
os.environ["LLMLOAD_ARCHIVE"] = os.path.join(tempfile.gettempdir(), f"llmload-test-archive-{os.getpid()}.sqlite")
# The run's mark on every process it starts (scripts/test_suite.py sets one for all its tiers); each
# pytest process of the run notes its pid (network namespaces are named by it: test_leftovers.py).
os.environ.setdefault(leftovers.RUN_VAR, uuid.uuid4().hex)
leftovers.note_test_process()


def _shared_server(item, cache: dict[str, tuple[str | None, str | None]]) -> tuple[str | None, str | None]:
    """The SHARED_SERVER of the fixture module behind any fixture ``item`` uses, if one has it, and
    the module's PREPARED_BY (the preparation of scripts/test_suite.py its server needs)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    prepared_by = None  # a fixture module of no shared server may still need a build (llamacpp_binary.py)
    for name in getattr(item, "fixturenames", ()):
        if name not in cache:
            fixturedefs = defs.get(name) or ()
            module = sys.modules.get(getattr(fixturedefs[-1].func, "__module__", "")) if fixturedefs else None
            cache[name] = (getattr(module, "SHARED_SERVER", None), getattr(module, "PREPARED_BY", None))
        if cache[name][0]:
            return cache[name]
        prepared_by = prepared_by or cache[name][1]
    return None, prepared_by


def _durations() -> dict[str, float]:
    """Seconds per test of a recent whole run (tests/durations.json, by scripts/test_suite.py
    --save-durations): the side-by-side tier starts the long ones first. A test missing from it
    only starts later than it could."""
    try:
        with open(os.path.join(TESTS, "durations.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def pytest_collection_modifyitems(config, items) -> None:
    """Each test gets its folder's marker, and the ``shared`` marker of the shared server it uses.

    Run side by side (tests/support/shards.py), the shared servers' tests go first (each group is
    one process's long chain: started early, it ends with the rest; a group whose build or install is
    still going is taken once it has ended, its ``prepared_by`` marker), then the others longest first,
    the unit tests after them (short ones fill the processes at the end). A plain ``pytest`` run keeps
    the files' order and puts the shared servers' tests last (llama-server may still be building
    beside it). The leftover check is always last."""
    cache: dict[str, tuple[str | None, str | None]] = {}
    groups: dict[int, str] = {}
    for item in items:
        part = os.path.relpath(str(item.path), TESTS).split(os.sep)[0]
        if part in FOLDER_MARKERS:
            item.add_marker(getattr(pytest.mark, part))
        group, prepared_by = _shared_server(item, cache)
        if group is None and vllm_order_key(item):  # the vLLM modules with a server of their own
            group, prepared_by = vllm_support.SHARED_SERVER, vllm_support.PREPARED_BY
        if group is not None:
            groups[id(item)] = group
            item.add_marker(pytest.mark.shared(group))
        if prepared_by is not None and not item.get_closest_marker("prepared_by"):
            item.add_marker(pytest.mark.prepared_by(prepared_by))
    side_by_side = bool(os.environ.get(shards.DIR_VAR))
    seconds = _durations() if side_by_side else {}

    def order(item) -> tuple:
        if item.get_closest_marker("last"):
            return (4,)
        if id(item) in groups:  # vLLM's: the session server's tests before the modules with their own
            return (0, groups[id(item)], vllm_order_key(item)) if side_by_side else \
                (3, groups[id(item)], vllm_order_key(item))
        if item.get_closest_marker("unit"):
            return (2,)
        return (1, -seconds.get(item.nodeid, 0.0))

    items.sort(key=order)  # stable: tests of equal rank keep the files' order


_test_number = itertools.count()


_CALL_FAILED = pytest.StashKey[bool]()


class LeftBehind(UserWarning):
    """Processes a failed test left alive, killed by the suite."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


@pytest.fixture(autouse=True)
def _no_process_left_behind(request) -> Iterator[None]:
    """Marks every process the test starts, and kills those still alive ``LEFT_GRACE_S`` after it
    ended: no process outlives its test, however the test ended. A test that passed and left one
    fails (it would leave it on every run); after a failure the kill is only noted (the failure may
    have skipped the test's own cleanup). Unit tests start none: they are not watched."""
    if request.node.get_closest_marker("unit"):
        yield
        return
    token = f"{os.getpid()}-{next(_test_number)}"
    before = leftovers.descendants(os.getpid())
    os.environ[leftovers.NODE_VAR] = token
    try:
        yield
    finally:
        os.environ.pop(leftovers.NODE_VAR, None)
    suspects = leftovers.marked(leftovers.NODE_VAR, token) | (leftovers.descendants(os.getpid()) - before)
    left = leftovers.alive_after(suspects, LEFT_GRACE_S)
    if not left:
        return
    what = leftovers.describe(left)
    leftovers.kill(left)
    said = f"{len(left)} process(es) this test started were still alive {LEFT_GRACE_S:.0f} s after it ended " \
           "(now killed):\n  " + "\n  ".join(what)
    if request.node.stash.get(_CALL_FAILED, True):  # failed, or never got to run: its failure is the report
        warnings.warn(LeftBehind(said), stacklevel=1)  # in the warnings summary, beside the failure
    else:
        pytest.fail(said, pytrace=False)



@pytest.fixture
def mock_factory(tmp_path) -> Iterator:
    started: list[Mock] = []

    def factory(*args: str) -> Mock:
        m = start_mock(tmp_path, *args)
        started.append(m)
        return m

    yield factory
    for m in started:
        stop_mock(m)


@pytest.fixture
def fixed_mock(mock_factory) -> Mock:
    """Fixed engine: first token after 40 ms, then one every 4 ms."""
    return mock_factory("--profile", "fixed", "--ttft-ms", "40", "--itl-ms", "4")
