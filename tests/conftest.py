"""Shared fixtures: a live `llmload mock` in its own process, on a free port of 127.0.0.1.

The test process is monkey-patched by gevent up front, as Locust does to every process that
imports it: some tests import Locust, and a process half patched mid-run misbehaves.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from tests.support.processes import ROOT, Mock, start_mock, stop_mock  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))

# A calibration this host's user made (`llmload calibrate`) must not change the tests' verdicts.
os.environ["LLMLOAD_CALIBRATION"] = os.path.join(ROOT, ".no-calibration-in-tests.json")
# ... nor may a test's sweep or report add runs to the user's archive (~/.local/share/llmload).
os.environ["LLMLOAD_ARCHIVE"] = os.path.join(tempfile.gettempdir(), f"llmload-test-archive-{os.getpid()}.sqlite")


def pytest_collection_modifyitems(config, items) -> None:
    """Each test gets the marker of its folder: ``unit`` (pure, fast), ``fuzz`` (the parsers'
    properties, Hypothesis), ``e2e`` (real processes and sockets against the mock), ``real``
    (llama.cpp, Chromium, network namespaces); the tests that need llama-server go last."""
    for item in items:
        part = os.path.relpath(str(item.path), TESTS).split(os.sep)[0]
        if part in ("unit", "e2e", "real", "fuzz"):
            item.add_marker(getattr(pytest.mark, part))
    # the llama.cpp tests last: `make test` builds llama-server beside the others (see the Makefile)
    items.sort(key=lambda item: bool(LLAMA_FIXTURES.intersection(getattr(item, "fixturenames", ()))))
    # --- vLLM (issue 30): after those, installed beside them by `make test`; the session server's first
    items.sort(key=vllm_order_key)


LLAMA_FIXTURES = frozenset({"llama_binary", "llama_server", "tiny_model"})

# --- vLLM (issue 30): one vllm_server for the whole session (defined here, not imported per module)
from tests.support.vllm import order_key as vllm_order_key  # noqa: E402
from tests.support.vllm import vllm_server_fixture  # noqa: E402, F401  (the fixture)


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
