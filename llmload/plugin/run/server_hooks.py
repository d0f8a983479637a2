"""The run's server hooks, on the leading process only (local or master, never a worker): the
engine's prefix-cache reset before the run (``--reset-cache vllm|sglang|auto``) and its profiler
around one measured step (``--profile-step N``, with ``--profile-options JSON`` as SGLang's
``/start_profile`` body). The calls are :mod:`llmload.server_metrics.engine_admin`'s; when they are
made is :mod:`llmload.plugin.run.profile_clock`'s.

* **The reset** is made before any load: at init for a headless or autostarted run, at each test
  start in the web UI. It failing ends the run before its first request (one line, exit code 1):
  a run asked to start from a cold cache that cannot have one measures something else, and its
  user would rather know now than after an hour of load. ``auto`` reads the server's ``/metrics``
  once (``--server-metrics``' first URL, else the host's) to tell vLLM from SGLang.
* **The profiler** failing (either call) is a warning: the run goes on, its numbers are still valid.
* Every call (hook, method, path, time, seconds, HTTP status, error) goes in ``PREFIX_run.json``
  under ``server_hooks``, and the profiled step under ``profile_step``.

Usage::

    hooks = ServerHooks(plugin)
    hooks.reset_at_init()          # unattended runs: raises ConfigError when the reset fails
    hooks.test_started()           # at test start (after the manifest is written)
    hooks.test_stopped()           # at test stop: the profiler's stop, in a greenlet ...
    hooks.join()                   # ... waited for before the run's files are finished
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import gevent

from llmload.plugin.options.flags import option
from llmload.plugin.options.option_checks import ConfigError
from llmload.plugin.output.run_manifest import write_manifest
from llmload.plugin.run.profile_clock import START, ProfileClock
from llmload.server_metrics.engine_admin import (
    ENGINES,
    HookCall,
    reset_cache,
    start_profile,
    stop_profile,
)
from llmload.server_metrics.fetch import ScrapeError, fetch
from llmload.server_metrics.known import detect_engine
from llmload.server_metrics.parse import ExpositionError, parse_exposition
from llmload.shapes.load_shapes import RampLoadShape
from llmload.shapes.warmup_shape import WarmupShape

log = logging.getLogger("llmload")

RESET_CHOICES = (*ENGINES, "auto")
POLL_S = 0.2
DETECT_TIMEOUT_S = 10.0
REPORT_WARMUP_S = 5.0  # the report's warm-up when the shape names none (llmload report's DEFAULT_WARMUP_S)
JOIN_S = 130.0  # the profiler's stop may write a large trace (engine_admin.PROFILE_TIMEOUT_S + slack)


@dataclass(frozen=True)
class HookSettings:
    reset: str | None = None  # vllm, sglang or auto
    profile_step: int | None = None
    profile_options: dict[str, Any] = field(default_factory=dict)


def hook_settings(environment: Any) -> HookSettings:
    """``--reset-cache``, ``--profile-step``, ``--profile-options``, checked (ConfigError with the flag)."""
    reset = option(environment, "reset_cache")
    if reset is not None and reset not in RESET_CHOICES:
        raise ConfigError(f"--reset-cache {reset!r}: expected one of {', '.join(RESET_CHOICES)}")
    step_text = option(environment, "profile_step")
    step = None
    if step_text is not None:
        text = str(step_text).strip()
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(f"--profile-step {step_text!r}: expected a step number >= 1 (the Nth load level after "
                              "the warm-up, as `llmload report` numbers its steps)")
        step = int(text)
    raw = option(environment, "profile_options")
    options: dict[str, Any] = {}
    if raw is not None:
        try:
            options = json.loads(raw)
        except ValueError:
            options = None  # type: ignore[assignment]
        if not isinstance(options, dict):
            raise ConfigError(f"--profile-options {raw!r}: expected a JSON object, e.g. "
                              "'{\"activities\": [\"GPU\"], \"output_dir\": \"/tmp/profile\"}'")
        if step is None:
            raise ConfigError("--profile-options needs --profile-step N: the step to profile")
    if step is not None:
        _check_shape(environment)
    return HookSettings(reset, step, options)


def _inner_shape(environment: Any) -> Any:
    shape = getattr(environment, "shape_class", None)
    return shape.inner if isinstance(shape, WarmupShape) else shape


def _check_shape(environment: Any) -> None:
    shape = _inner_shape(environment)
    if isinstance(shape, RampLoadShape):
        raise ConfigError("--profile-step: a ramp has no steps (its user count changes every second); profile a "
                          "step, rate-ladder or search shape, or a plain -u/-t run (--profile-step 1)")


def report_warmup_s(environment: Any) -> float:
    """The warm-up the report will use: the shape's ``warmup_s`` (PREFIX_run.json), else 5 s."""
    shape = _inner_shape(environment)
    describe = getattr(shape, "describe", None)
    try:
        value = describe().get("warmup_s") if callable(describe) else None
    except (ValueError, TypeError, AttributeError):
        value = None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else REPORT_WARMUP_S


def server_engine(host: str, metrics_urls: tuple[str, ...]) -> tuple[str | None, str]:
    """(engine, where it was read) from one read of the server's ``/metrics``; engine None: not told."""
    url = metrics_urls[0] if metrics_urls else host.rstrip("/") + "/metrics"
    try:
        return detect_engine(parse_exposition(fetch(url, DETECT_TIMEOUT_S), source=url)), url
    except (ScrapeError, ExpositionError) as e:
        return None, f"{url} ({e})"


class ServerHooks:
    """See the module docstring; ``plugin`` is the process's :class:`~llmload.plugin.wiring.LLMLoadPlugin`."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin
        self.calls: list[HookCall] = []
        self._reset_done: HookCall | None = None  # made at init, to be named in the test's manifest
        self._clock: ProfileClock | None = None
        self._watcher: gevent.Greenlet | None = None
        self._stopper: gevent.Greenlet | None = None
        self._settings = HookSettings()
        self._halt = False  # the test stopped: the watcher makes no further call
        self._last_reset: HookCall | None = None

    # -- what every hook needs -------------------------------------------------------------------
    def _host(self) -> str:
        env = self.plugin.env
        return env.host or next((c.host for c in env.user_classes if getattr(c, "host", None)), "") or ""

    def _headers(self) -> dict[str, str]:
        """The run's key and --header values, as its requests carry them (only to the host they are bound to)."""
        client = self.plugin.client_for(self._host(), self.plugin.config.client)
        return dict(client.request_headers())

    def _record(self, done: HookCall) -> None:
        self.calls.append(done)
        manifest = self.plugin.run.manifest
        if manifest is not None:
            manifest.data["server_hooks"] = [c.describe() for c in self.calls]
            if self._clock is not None:
                manifest.data["profile_step"] = self._profile_entry()
            write_manifest(manifest.path, manifest.data)

    # -- the reset -------------------------------------------------------------------------------
    def _reset(self) -> HookCall | None:
        """Reset as --reset-cache says (None: not asked); raises ConfigError when it cannot be done."""
        self._settings = settings = hook_settings(self.plugin.env)
        self._last_reset = None
        if settings.reset is None:
            return None
        host = self._host()
        engine = settings.reset
        if engine == "auto":
            engine, where = server_engine(host, self.plugin.config.server_metrics.urls)
            if engine not in ENGINES:
                what = f"a {engine} server" if engine else "not an engine llmload knows"
                raise ConfigError(f"--reset-cache auto: {where} is {what}; name the engine: --reset-cache "
                                  f"{'|'.join(ENGINES)}")
        done = self._last_reset = reset_cache(host, engine, headers=self._headers())
        if not done.ok:
            hint = " (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)" if engine == "vllm" and \
                done.http_status == 404 else ""
            raise ConfigError(f"--reset-cache {settings.reset}: {done.error}{hint}; no load was sent (drop "
                              "--reset-cache to run on a warm cache)")
        log.info("llmload: %s prefix cache reset (POST %s, %.2f s)", engine, done.path, done.seconds)
        return done

    def reset_at_init(self) -> None:
        """A headless or autostarted run's reset, before anything starts (raises ConfigError)."""
        self._reset_done = self._reset()

    # -- the test --------------------------------------------------------------------------------
    def test_started(self) -> None:
        """At a test start, on the leading process, after PREFIX_run.json is written."""
        plugin = self.plugin
        self.calls = []
        self._clock, self._halt = None, False
        if self._reset_done is not None:  # made at init: this test's manifest names it
            self._record(self._reset_done)
            self._reset_done = None
        else:
            try:
                done = self._reset()
            except ConfigError as e:
                if self._last_reset is not None:  # the call that failed, in this test's manifest
                    self._record(self._last_reset)
                plugin.env.process_exit_code = 1
                plugin.gate.fail(str(e))
                return
            if done is not None:
                self._record(done)
        settings = self._settings
        if settings.profile_step is not None:
            self._clock = ProfileClock(settings.profile_step, report_warmup_s(plugin.env))
            self._watcher = gevent.spawn(self._watch)

    def _measuring(self) -> bool:
        plugin = self.plugin
        if plugin.config.warmup is None:
            return True
        until = plugin.warmup_rows.until
        return until is not None and until != math.inf

    def _level(self) -> tuple[int, float | None]:
        runner = self.plugin.env.runner
        return int(getattr(runner, "target_user_count", 0) or 0), self.plugin.rate_override

    def _watch(self) -> None:
        clock = self._clock
        assert clock is not None
        while not clock.stopped and not self._halt:
            action = clock.observe(time.time(), self._level(), self._measuring())
            if action is not None:
                self._profile(action)
            gevent.sleep(POLL_S)

    def _profile(self, action: str) -> None:
        clock = self._clock
        assert clock is not None
        host, headers = self._host(), self._headers()
        if action == START:
            done = start_profile(host, self._settings.profile_options, headers=headers)
        else:
            done = stop_profile(host, headers=headers)
        done.note = f"step {clock.step}"
        if done.ok:
            log.info("llmload: --profile-step %d: POST %s (%.2f s)", clock.step, done.path, done.seconds)
        else:
            done.note += ": failed, the run went on (its numbers are still valid)"
            log.warning("llmload: --profile-step %d: %s; the run goes on (its numbers are still valid)",
                        clock.step, done.error)
            if action == START:
                clock.stopped = True  # no profiler runs: nothing to stop
        self._record(done)

    def _profile_entry(self) -> dict[str, Any]:
        clock = self._clock
        assert clock is not None
        opens = clock.window_opens
        return {"step": clock.step, "warmup_s": clock.warmup_s,
                "step_began": None if clock.step_began is None else round(clock.step_began, 3),
                "window_opens": None if opens is None else round(opens, 3),
                "started": any(c.hook == "start_profile" and c.ok for c in self.calls),
                "stopped": any(c.hook == "stop_profile" and c.ok for c in self.calls),
                "why_not": clock.why_not() or next((c.error for c in self.calls if not c.ok), None),
                "options": self._settings.profile_options}

    def test_stopped(self) -> None:
        """The load has stopped: the profiler's stop, if it still runs, in a greenlet (see :meth:`join`):
        a master must go on to collect its workers' last rows meanwhile."""
        if self._clock is not None:
            self._halt = True
            self._stopper = gevent.spawn(self._end)

    def _end(self) -> None:
        clock, watcher = self._clock, self._watcher
        assert clock is not None
        self._watcher = None
        if watcher is not None:
            watcher.join(timeout=JOIN_S)  # a call it is making finishes first (it then sees the halt)
        if clock.ended(time.time()) is not None:
            self._profile("stop")
            return
        if not clock.started:
            log.warning("llmload: --profile-step %d: the profiler was not started: %s", clock.step, clock.why_not())
        self._record_profile_entry()

    def _record_profile_entry(self) -> None:
        manifest = self.plugin.run.manifest
        if manifest is not None and self._clock is not None:
            manifest.data["profile_step"] = self._profile_entry()
            write_manifest(manifest.path, manifest.data)

    def join(self) -> None:
        """Before the run's files are finished: the profiler's stop has answered (bounded)."""
        stopper, self._stopper = self._stopper, None
        if stopper is not None:
            stopper.join(timeout=JOIN_S)
