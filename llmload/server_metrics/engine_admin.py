"""The engine's admin endpoints around a measurement: its prefix-cache reset and its profiler, one
HTTP call each, timed and never raising. Used by the run's server hooks (:mod:`llmload.plugin.run.server_hooks`)
and by ``llmload sweep`` before each cell.

Where each engine has them (from their own code, see ``docs/observability.md``):

==========  ===============================  ========================================================
engine      cache reset                      profiler
==========  ===============================  ========================================================
vLLM        ``POST /reset_prefix_cache``     ``POST /start_profile``, ``POST /stop_profile`` (no body;
            (only with ``VLLM_SERVER_DEV_    served when the server was started with a profiler:
            MODE=1``)                        ``--profiler-config`` / ``VLLM_TORCH_PROFILER_DIR``)
SGLang      ``POST /flush_cache``            ``POST /start_profile`` with a JSON body of its
                                             ``ProfileReqInput`` (``output_dir``, ``activities``,
                                             ``with_stack``, ``record_shapes``, ...), ``POST /stop_profile``
==========  ===============================  ========================================================

vLLM's profiler routes read no body, so the same JSON body goes to both engines.

Usage::

    call = reset_cache("http://127.0.0.1:8000", "vllm")         # HookCall(ok=True, http_status=200, ...)
    call = start_profile(url, {"activities": ["GPU"]}); call.describe()   # for PREFIX_run.json
    call = stop_profile(url)
    if not call.ok: print(call.error)                           # "POST /stop_profile answered HTTP 500: ..."
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RESET_PATHS = {"vllm": "/reset_prefix_cache", "sglang": "/flush_cache"}
ENGINES = tuple(RESET_PATHS)
START_PROFILE, STOP_PROFILE = "/start_profile", "/stop_profile"
RESET_TIMEOUT_S = 60.0
PROFILE_TIMEOUT_S = 120.0  # stopping writes the trace: vLLM answers once every worker has written its file
_ANSWER_BYTES = 300  # of an error answer, quoted in the message


@dataclass
class HookCall:
    """One admin call: what was asked, when, and what came back (``http_status`` None: no answer)."""

    hook: str  # "reset_cache", "start_profile", "stop_profile"
    method: str
    path: str
    time: float  # epoch s when it was sent
    seconds: float = 0.0  # until the answer (or the failure)
    http_status: int | None = None
    error: str = ""  # "" when it worked
    engine: str = ""  # vllm, sglang ('' when it does not matter: the profiler)
    note: str = ""  # what the run made of it (the step it profiled, "the run went on")

    @property
    def ok(self) -> bool:
        return not self.error

    def describe(self) -> dict[str, Any]:
        """The manifest's entry (``PREFIX_run.json`` ``server_hooks``)."""
        out = {"hook": self.hook, "method": self.method, "path": self.path, "time": round(self.time, 3),
               "seconds": round(self.seconds, 3), "http_status": self.http_status, "ok": self.ok,
               "error": self.error or None}
        if self.engine:
            out["engine"] = self.engine
        if self.note:
            out["note"] = self.note
        return out


def call(base_url: str, hook: str, path: str, body: bytes | None = None, timeout_s: float = RESET_TIMEOUT_S,
         headers: Mapping[str, str] | None = None) -> HookCall:
    """``POST base_url + path``; any 2xx is success. Never raises: what went wrong is in ``error``."""
    sent = time.time()
    t0 = time.perf_counter()
    done = HookCall(hook, "POST", path, sent)
    head = dict(headers or {})
    if body is not None:
        head.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(base_url.rstrip("/") + path, data=body if body is not None else b"",
                                 headers=head, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (the run's own server)
            done.http_status = resp.status
            resp.read(_ANSWER_BYTES)
    except urllib.error.HTTPError as e:
        done.http_status = e.code
        answer = e.read(_ANSWER_BYTES).decode("utf-8", "replace").strip().replace("\n", " ")
        done.error = f"POST {path} answered HTTP {e.code}" + (f": {answer}" if answer else "")
    except urllib.error.URLError as e:
        done.error = f"POST {path} failed: {e.reason}"
    except (OSError, http.client.HTTPException, ValueError) as e:
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        done.error = f"POST {path} failed: {why}"
    done.seconds = time.perf_counter() - t0
    return done


def reset_cache(base_url: str, engine: str, timeout_s: float = RESET_TIMEOUT_S,
                headers: Mapping[str, str] | None = None) -> HookCall:
    """Empty the engine's prefix cache (vLLM: ``/reset_prefix_cache``, SGLang: ``/flush_cache``)."""
    if engine not in RESET_PATHS:
        raise ValueError(f"cache reset: unknown engine {engine!r}: expected one of {', '.join(ENGINES)}")
    done = call(base_url, "reset_cache", RESET_PATHS[engine], None, timeout_s, headers)
    done.engine = engine
    return done


def start_profile(base_url: str, options: Mapping[str, Any] | None = None, timeout_s: float = PROFILE_TIMEOUT_S,
                  headers: Mapping[str, str] | None = None) -> HookCall:
    """Start the engine's profiler; ``options`` is SGLang's ``ProfileReqInput`` (vLLM reads no body)."""
    return call(base_url, "start_profile", START_PROFILE, json.dumps(dict(options or {})).encode(), timeout_s,
                headers)


def stop_profile(base_url: str, timeout_s: float = PROFILE_TIMEOUT_S,
                 headers: Mapping[str, str] | None = None) -> HookCall:
    return call(base_url, "stop_profile", STOP_PROFILE, None, timeout_s, headers)
