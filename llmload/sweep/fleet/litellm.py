"""LiteLLM's proxy as a fleet's router: its pinned version, where llmload keeps it, and the config
llmload writes from the plan. Pure but for :func:`install` and the file checks.

LiteLLM is installed in a venv of its own, outside the repository and keyed by version:
``$LLMLOAD_CACHE/litellm/1.108.7`` (default ``~/.cache/llmload``), as llama-server's build is. The
install holds a lock and marks the venv done only once pip finished (an interrupted one is redone);
:func:`wait_installed` waits for an install under way (``make test`` runs it beside the tests).
The version is pinned: **1.107.0 was reported as a compromised release** and is refused here,
whatever asks for it. ``python -m llmload.sweep.fleet.litellm install`` (``make router-deps``)
creates it.

Policies (LiteLLM's ``router_settings.routing_strategy``, read from
``litellm/router_utils/routing_groups.py`` and ``router_strategy/`` of the installed package):
``random`` → ``simple-shuffle`` (a random deployment; LiteLLM has no round-robin), ``least_conn``
→ ``least-busy`` (the fewest requests in flight), ``latency`` → ``latency-based-routing``, and
``affinity`` → ``simple-shuffle`` with the ``session_affinity`` pre-call check, which pins each
session id (any ``x-…-session-id`` header: llmload's ``X-Llmload-Session-Id``) to the replica its
first request went to. Each replica is a deployment ``openai/MODEL`` at its ``/v1``, with the id
``replica-I``; no retries (a failed request fails, as the client would see it). The proxy wants a
master key: each start gets a fresh one, in its environment and the cell's Locust's
(``LLMLOAD_API_KEY``), never in a file.

Usage::

    text = config_text(["http://127.0.0.1:8001", "http://127.0.0.1:8002"], "tiny", "least_conn")
    venv()                  # Path(~/.cache/llmload/litellm/1.108.7)
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

VERSION = "1.108.7"
COMPROMISED = frozenset({"1.107.0"})  # reported as a compromised release: never installed
POLICIES = {"random": "simple-shuffle", "least_conn": "least-busy", "latency": "latency-based-routing",
            "affinity": "simple-shuffle + session_affinity"}
MODEL_ID_HEADER = "x-litellm-model-id"
HEALTH_PATH = "/health/liveliness"
CONF = "litellm.yaml"


def cache_root() -> Path:
    return Path(os.environ.get("LLMLOAD_CACHE") or Path.home() / ".cache" / "llmload")


def venv(version: str = VERSION) -> Path:
    return cache_root() / "litellm" / version


def binary() -> Path:
    return venv() / "bin" / "litellm"


def _done_mark(version: str = VERSION) -> Path:
    return venv(version) / ".llmload-installed"  # written after pip finished: a venv without it is half made


def _lock(version: str = VERSION) -> int:
    path = cache_root() / "litellm" / f".lock-{version}"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes
    return fd


def install_command(version: str = VERSION) -> str:
    where = venv(version)
    return f"python3 -m venv {where} && {where}/bin/pip install 'litellm[proxy]=={version}'"


def install_problem() -> str | None:
    if os.access(binary(), os.X_OK) and _done_mark().is_file():
        return None
    return (f"LiteLLM {VERSION} is not installed where llmload runs it from ({venv()}): {install_command()} "
            "(or: make router-deps)")


def config_text(replica_urls: list[str], model: str, policy: str) -> str:
    """The proxy's YAML (JSON is YAML): one deployment per replica, the routing strategy of ``policy``."""
    router: dict[str, object] = {"routing_strategy": POLICIES[policy].split(" ")[0], "num_retries": 0}
    if policy == "affinity":
        router["optional_pre_call_checks"] = ["session_affinity"]
    config = {
        "model_list": [{"model_name": model,
                        "litellm_params": {"model": f"openai/{model}", "api_base": f"{url}/v1", "api_key": "none",
                                           "timeout": 600, "stream_timeout": 600},
                        "model_info": {"id": f"replica-{i}"}} for i, url in enumerate(replica_urls)],
        "router_settings": router,
        "litellm_settings": {"request_timeout": 600},
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }
    return json.dumps(config, indent=2) + "\n"


def command(config: str, port: int) -> list[str]:
    return [str(binary()), "--config", config, "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]


def environment(master_key: str) -> dict[str, str]:
    """The proxy's own variables: its key, and no fetch of the model price map at start."""
    return {"LITELLM_MASTER_KEY": master_key, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}


def upstream_index(headers: dict[str, str]) -> int | None:
    """Which replica served a response: LiteLLM's ``x-litellm-model-id`` (``replica-I``)."""
    value = headers.get(MODEL_ID_HEADER, "")
    return int(value.rsplit("-", 1)[1]) if value.startswith("replica-") and value[8:].isdigit() else None


def install(version: str = VERSION) -> Path:
    """Create the venv and install ``litellm[proxy]==version`` into it (once; then a no-op)."""
    if version in COMPROMISED:
        raise SystemExit(f"litellm {version} was reported as a compromised release: not installing it")
    where = venv(version)
    exe = where / "bin" / "litellm"
    fd = _lock(version)
    try:
        if os.access(exe, os.X_OK) and _done_mark(version).is_file():
            return exe
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        subprocess.run([str(where / "bin" / "pip"), "install", "--quiet", f"litellm[proxy]=={version}"], check=True)
        _done_mark(version).write_text(version + "\n")
    finally:
        os.close(fd)
    return exe


def wait_installed() -> str | None:
    """Wait for an install another process is making, then :func:`install_problem`."""
    os.close(_lock())
    return install_problem()


if __name__ == "__main__":  # python -m llmload.sweep.fleet.litellm install
    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python -m llmload.sweep.fleet.litellm install")
    print(install())
