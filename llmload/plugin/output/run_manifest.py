"""``PREFIX_run.json``: what a run was, so that its numbers can be told apart from another run's.

One manifest per run, written by the process that writes ``PREFIX_requests.csv`` (the master or
the local process) when the test starts, and again with its end time when it stops. Every row
of that run carries the same ``run_id``. Fields: ``run_id, start_time, start, end_time, end,
llmload_version, locust_version, command_line`` (secrets removed), ``host, model, models``
(the server's ``/v1/models`` answer), ``scenarios`` (file, sha256), ``seed, workers,
stop_timeout, shape`` (the shape class and its resolved settings), and at the end ``client`` (the
load generator's verdict and what is behind it: :func:`llmload.health.run_verdict.client_details`).

Usage::

    run = RunIdentity(); run.start(environment, config, "runs/chat", "local")   # at test start
    rows = run.pass_on(rows)                                            # every batch written
    run.finish(time.time(), client=details)                             # at the end
    # the parts:
    run_id = new_run_id(time.time())
    data = build_manifest(run_id, time.time(), argv=sys.argv, host=..., models=models_or_error(host, client), ...)
    write_manifest("runs/chat_run.json", data)
    finish_manifest("runs/chat_run.json", data, time.time())
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterable, Sequence
from typing import Any

from llmload import files
from llmload.transport.connection import ClientOptions
from llmload.transport.models import first_model_id, models_or_error
from llmload.wire.redact import is_secret_name
from llmload.wire.redact import redact_url as _redact_url

MANIFEST_SUFFIX = files.MANIFEST
MODELS_TIMEOUT_S = 5.0
_RUN_ID_COL = files.COL.run_id
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pass", "auth", "authorization", "login",
                 "credential", "credentials", "cookie", "bearer"}


def new_run_id(now: float) -> str:
    """``20261130T101500Z-3f9a1c``: sortable by start time, unique across runs and machines."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-" + secrets.token_hex(3)


# Flags named like secrets that take no value: the argument after them is not theirs to hide.
_SECRET_BOOLEANS = frozenset({"--web-login"})
_PAIR_FLAGS = {"--header": ":", "-H": ":", "--query": "="}  # their values are NAME: VALUE / NAME=VALUE


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line without secrets: values of flags named like keys, tokens, passwords or
    logins; ``--header``/``--query`` values whose name is a secret's (``Authorization: Bearer …``,
    ``key=…``); and the password and secret query values of any URL."""
    out: list[str] = []
    pending: str | None = None  # the flag whose value comes next: "secret", or a pair flag
    for arg in argv:
        if pending is not None:
            out.append("***" if pending == "secret" else _redact_pair(arg, _PAIR_FLAGS[pending]))
            pending = None
            continue
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and flag in _PAIR_FLAGS:
            if eq:
                out.append(f"{flag}={_redact_pair(value, _PAIR_FLAGS[flag])}")
            else:
                out.append(arg)
                pending = flag
            continue
        if arg.startswith("-") and _secret_flag(flag):
            if eq:
                out.append(flag + "=***")
            else:
                out.append(arg)
                pending = None if flag in _SECRET_BOOLEANS else "secret"
            continue
        out.append(redact_url(arg) if "://" in arg else arg)
    return out


def _redact_pair(text: str, sep: str) -> str:
    name, found, _value = text.partition(sep)
    return f"{name}{sep}{' ' if sep == ':' else ''}***" if found and is_secret_name(name) else text


def _secret_flag(flag: str) -> bool:
    """``--api-key``, ``--web-login``, ``--auth-token``: yes; ``--output-tokens``: no."""
    return any(w in _SECRET_WORDS for w in re.split(r"[-_]+", flag.lstrip("-").lower()))


def redact_url(url: str | None) -> str | None:
    """Userinfo passwords and secret query values out of a URL (wire.redact)."""
    return _redact_url(url)


def file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scenario_entries(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Each scenario file's name and content hash (sha256)."""
    out = []
    for path in paths:
        entry: dict[str, Any] = {"file": path}
        try:
            entry["sha256"] = file_hash(path)
        except OSError as e:
            entry["error"] = str(e)
        out.append(entry)
    return out


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def build_manifest(run_id: str, start: float, *, argv: Sequence[str], host: str | None, model: str | None,
                   models: Any, scenario_files: Iterable[str], seed: int | None, scenario_seeds: dict[str, int],
                   workers: int, stop_timeout: float | None, shape: dict[str, Any] | None,
                   locust_version: str, llmload_version: str,
                   intended_hit_rates: dict[str, float] | None = None) -> dict[str, Any]:
    """The manifest of a run that starts now (``end_time`` is filled by :func:`finish_manifest`)."""
    return {
        "run_id": run_id,
        "start_time": round(start, 3),
        "start": _iso(start),
        "end_time": None,
        "end": None,
        "llmload_version": llmload_version,
        "locust_version": locust_version,
        "command_line": redact_argv(["locust", *argv[1:]] if argv and "locust" in argv[0] else argv),
        "host": redact_url(host),
        "model": model or first_model_id(models),
        "models": models,
        "scenarios": scenario_entries(scenario_files),
        "seed": seed,
        "scenario_seeds": scenario_seeds,
        "intended_prefix_hit_rate": intended_hit_rates or {},  # prefix_hit_rate per workload: the report checks it
        "workers": workers,
        "stop_timeout": stop_timeout,
        "shape": shape,
    }


def finish_manifest(path: str, data: dict[str, Any], end: float) -> None:
    data["end_time"] = round(end, 3)
    data["end"] = _iso(end)
    write_manifest(path, data)


@functools.cache
def _manifest_writes() -> Any:
    """One lock for the process's manifest writes (made at the first: this module's pure parts are
    read without gevent)."""
    import gevent.lock

    return gevent.lock.Semaphore()


def write_manifest(path: str, data: dict[str, Any]) -> None:
    """The manifest as it is now, whole; the writes of one process land in the order they were asked
    (each runs off the loop, and the file's fsync can take seconds on a busy disk)."""
    from llmload.net.turns import off_the_loop

    off_the_loop(files.replace_atomically, path, json.dumps(data, indent=2, default=str) + "\n",
                 hold=_manifest_writes())


class RunManifest:
    """The manifest of the run in progress, for the process that writes the CSVs. The server's
    ``/v1/models`` is asked in a greenlet so that a slow server never delays the test's start."""

    def __init__(self, path: str, data: dict[str, Any], host: str | None, client: ClientOptions,
                 shape: Any = None) -> None:
        import gevent

        self.path = path
        self.data = data
        self.shape = shape
        self._fetch = gevent.spawn(self._fill_models, host, client)

    def _fill_models(self, host: str | None, client: ClientOptions) -> None:
        models = models_or_error(host, client, MODELS_TIMEOUT_S)
        self.data["models"] = models
        self.data["model"] = self.data.get("model") or first_model_id(models)
        write_manifest(self.path, self.data)

    def finish(self, end: float, client: dict[str, Any] | None = None) -> None:
        self._fetch.join(timeout=MODELS_TIMEOUT_S + 1.0)
        self._fetch.kill(block=False)
        if self.shape is not None and self.data.get("shape"):  # what the shape did (the search's steps)
            self.data["shape"] = {"class": type(self.shape).__name__, **_describe(self.shape)}
        if client is not None:  # the client's verdict and its details (health.run_verdict.client_details)
            self.data["client"] = client
        finish_manifest(self.path, self.data, end)


def _describe(shape: Any) -> dict[str, Any]:
    describe = getattr(shape, "describe", None)
    try:
        return describe() if callable(describe) else {}
    except (ValueError, TypeError, AttributeError) as e:  # a shape the run could not use
        return {"error": str(e)}


def start_manifest(environment: Any, config: Any, run_id: str, prefix: str, workers: int) -> RunManifest:
    """Write ``PREFIX_run.json`` for a run that starts now (the test_start of the CSV writer); the
    server's models are asked with the run's own connection settings (``config.client``)."""
    import sys

    import locust

    from llmload import __version__
    from llmload.plugin.options.seeds import workload_seed
    from llmload.shapes.warmup_shape import WarmupShape

    opts = environment.parsed_options
    shape = environment.shape_class
    if isinstance(shape, WarmupShape):  # the warm-up is its own key; "shape" is what runs after it
        shape = shape.inner
    shape_info = None if shape is None else {"class": type(shape).__name__, **_describe(shape)}
    host = environment.host or next((c.host for c in environment.user_classes if getattr(c, "host", None)), None)
    data = build_manifest(
        run_id, time.time(), argv=sys.argv, host=host, model=getattr(opts, "model", None) or None,
        models=None, scenario_files=[s.path for s in config.scenarios], seed=int(getattr(opts, "seed", 0) or 0),
        scenario_seeds={s.path: workload_seed(opts, s) for s in config.scenarios}, workers=workers,
        stop_timeout=environment.stop_timeout, shape=shape_info, locust_version=locust.__version__,
        llmload_version=__version__,
        intended_hit_rates={w.name: w.intended_hit_rate for s in config.scenarios for w in s.workloads
                            if w.intended_hit_rate is not None})
    warmup = getattr(config, "warmup", None)
    if warmup is not None:
        data["warmup"] = warmup.describe()
    path = prefix + MANIFEST_SUFFIX
    # at once, in the loop, but without the fsync (seconds on a busy disk, before the first request):
    # a file that cannot be written is said here; the models' rewrite and the end's are flushed
    files.replace_atomically(path, json.dumps(data, indent=2, default=str) + "\n", sync=False)
    return RunManifest(path, data, host, config.client, shape)


class RunIdentity:
    """The run's id and manifest for one Locust process: the CSV writer (master or local) makes
    them at each test start; a worker gets the id from its master. :meth:`stamp` puts the id in
    each row's ``run_id`` cell (rows are stamped when they leave the queue: shipped or written);
    :meth:`pass_on` also hands each written batch to ``listeners`` (the search shape)."""

    def __init__(self) -> None:
        self.run_id = ""
        self.manifest: RunManifest | None = None
        self.listeners: list[Any] = []

    def start(self, environment: Any, config: Any, prefix: str | None, mode: str) -> None:
        """At a test start: a new id and manifest in the process that writes the CSV (not a worker)."""
        if mode == "worker":
            return
        self.run_id = new_run_id(time.time())
        if prefix:
            workers = int(getattr(environment.runner, "worker_count", 1))
            self.manifest = start_manifest(environment, config, self.run_id, prefix, workers)

    def stamp(self, rows: list) -> list:
        """Rows with this run's id in their run_id cell (unchanged while the id is unknown)."""
        if self.run_id:
            col, run_id = _RUN_ID_COL, self.run_id
            rows = [(*row[:col], run_id, *row[col + 1:]) for row in rows]
        return rows

    def pass_on(self, rows: list) -> list:
        """:meth:`stamp`, then every listener gets the rows (each batch written once)."""
        rows = self.stamp(rows)
        for listener in self.listeners:
            listener(rows)
        return rows

    def finish(self, end: float, client: dict[str, Any] | None = None) -> None:
        if self.manifest is not None:
            self.manifest.finish(end, client)
            self.manifest = None
