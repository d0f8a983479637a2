"""Fixture: the built ``llama-server`` binary alone, for tests that start servers of their own (a
sweep's cells, a fleet's replicas). Not tests/support/llamacpp.py's shared server: a test of this
fixture alone is not tied to that server's process, so side by side it runs beside the shared
group once the build is done (its ``prepared_by`` marker), instead of after it.

The build happens once per machine (``make llama-server``, or here on first use, ~7 min); a failed
build fails the test with the build log's tail. Outside CI, ``LLMLOAD_SKIP_LLAMACPP=1`` skips it.

Usage::

    from tests.support.llamacpp_binary import llama_binary_fixture  # noqa: F401  (the fixture)

    def test_x(llama_binary):
        subprocess.run([str(llama_binary), "--version"])
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts.llama_server import LlamaServerError, ensure_llama_server

PREPARED_BY = "llama_server"  # scripts/test_suite.py: the build this fixture waits for


def build_or_fail() -> Path:
    if os.environ.get("LLMLOAD_SKIP_LLAMACPP") and os.environ.get("CI") != "true":
        pytest.skip("LLMLOAD_SKIP_LLAMACPP is set: the llama.cpp tests are skipped")
    try:
        return ensure_llama_server()
    except LlamaServerError as e:
        pytest.fail(f"could not build llama-server: {e}", pytrace=False)


@pytest.fixture(scope="session", name="llama_binary")
def llama_binary_fixture() -> Path:
    """The built ``llama-server`` (built here on first use; a failed build fails the test)."""
    return build_or_fail()
