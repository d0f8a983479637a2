"""The last test of a run: nothing the run started (a mock, Locust, llama-server, vLLM, nginx,
Chromium, a network namespace) is still alive.

Every process started by a test carries the run's mark in its environment (tests/conftest.py,
tests/support/leftovers.py), so this finds one even after its parent died. ``make test`` runs this
file in a tier of its own, after the others; a plain ``pytest`` run sorts it last. Under xdist it
would see the other workers' tests still running, so there it is skipped.
"""

from __future__ import annotations

import os

import pytest

from tests.support import leftovers, netns

pytestmark = pytest.mark.last


def test_no_process_the_run_started_is_still_alive():
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("runs alone, after every other test (make test's tier 'last')")
    mine = leftovers.ancestors(os.getpid()) | leftovers.descendants(os.getpid())  # this pytest, make, the shell
    left = leftovers.alive_after(leftovers.marked(leftovers.RUN_VAR, os.environ[leftovers.RUN_VAR]) - mine, 5.0)
    what = leftovers.describe(left)
    leftovers.kill(left)
    assert not left, "still alive at the end of the run (now killed):\n  " + "\n  ".join(what)


def test_no_network_namespace_is_left():
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("runs alone, after every other test (make test's tier 'last')")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    ours = leftovers.test_processes()
    left = [ns for ns in netns.namespaces() if (m := netns.NS_RE.match(ns)) and int(m.group(1)) in ours]
    assert not left, f"network namespaces left by this run's tests: {left}"
