"""Locust wiring: llmload's options, its checks at init, and Locust's events routed to the modules
that do the work. One :class:`LLMLoadPlugin` per Locust process, at ``environment.llmload``.

* :mod:`llmload.options`: the argument table (registered here for Locust's parser).
* :mod:`llmload.config`: everything checked once; a bad configuration ends the run at ``init``
  with one line and exit code 1 (in the web UI, at the start of a test).
* Data path: a user calls :meth:`LLMLoadPlugin.record` for every finished request. Locally the
  row goes to ``PREFIX_requests.csv`` (:mod:`llmload.output`, flushed every second) and into the
  LLM stats (:mod:`llmload.stats`); on a worker rows and histogram deltas travel to the master
  (:mod:`llmload.distributed`), which writes them and merges the stats.
* The live view (:mod:`llmload.live`) is fed by every row the master or local process writes and
  sampled every 2 s into ``PREFIX_llm_history.csv``, the LLM tab and the dashboard.
* At the end a headless run prints the summary (:mod:`llmload.summary`).

Usage (what a locustfile does by importing :class:`llmload.LLMUser`)::

    plugin = get_plugin(environment)
    plugin.record(request_record)
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from typing import Any

import gevent
import gevent.lock
from locust import events
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from llmload.config import ConfigError, RunConfig, UserSetup, build_config
from llmload.distributed import WORKER_REPORT_S, MasterLink, WorkerLink
from llmload.health import ClientHealth
from llmload.histogram import Histogram
from llmload.live import LiveHistory, LiveWindow
from llmload.manifest import RunManifest, new_run_id, start_manifest
from llmload.options import add_arguments, api_key_from_env, option
from llmload.output import HistoryCsv, RequestsCsv, write_llm_stats
from llmload.record import CANCELLED, CSV_COLUMNS, OK, RequestRecord
from llmload.replay_link import ReplayLink
from llmload.server_scrape import ServerMetricsScraper, start_scraper
from llmload.slo import task_limit_s
from llmload.stats import LLMStats
from llmload.summary import format_summary, run_notes
from llmload.tasks import TaskRecord
from llmload.transport import ClientOptions, first_model
from llmload.workload.shared import SharedState

log = logging.getLogger("llmload")

HISTORY_INTERVAL_S = 2.0
LOCAL_FLUSH_S = 1.0
_USERS_COL = CSV_COLUMNS.index("users")
_RUN_ID_COL = CSV_COLUMNS.index("run_id")
_IMPORT_PID = os.getpid()  # Locust forks --processes after importing the locustfile

events.init_command_line_parser.add_listener(add_arguments)


@events.init.add_listener
def on_init(environment: Environment, **_kw: Any) -> None:
    plugin = get_plugin(environment)
    plugin.check_at_init()
    if environment.web_ui is not None:
        from llmload.webui import install

        install(environment, plugin)


def get_plugin(environment: Environment) -> LLMLoadPlugin:
    plugin = getattr(environment, "llmload", None)
    if plugin is None:  # also an Environment built by hand (tests, library use)
        plugin = environment.llmload = LLMLoadPlugin(environment)  # type: ignore[attr-defined]
    return plugin


def _quiet_child() -> bool:
    """A process Locust forked for --processes under a master: the master reports the problem."""
    worker_cli = "--worker" in sys.argv or bool(os.environ.get("LOCUST_MODE_WORKER"))
    return os.getpid() != _IMPORT_PID and not worker_cli


class LLMLoadPlugin:
    """One per Locust process; see the module docstring."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        runner = environment.runner
        self.mode = "worker" if isinstance(runner, WorkerRunner) else (
            "master" if isinstance(runner, MasterRunner) else "local")
        self._config: RunConfig | None = None
        self.config_error = ""
        self.stats = LLMStats()
        self.pending_rows: list[tuple] = []
        self.writer: RequestsCsv | None = None
        self.rows_total = 0
        self.run_id = ""  # this run's id, on every row the process writes (PREFIX_run.json)
        self.manifest: RunManifest | None = None
        self.row_listeners: list[Any] = []  # called with each batch of rows written (the search shape)
        self._model: str | None = None
        self._model_lock = gevent.lock.Semaphore()
        self._request_prefix = ""
        self._request_n = 0
        self._background: list[gevent.Greenlet] = []
        self._finished_run = True
        self.processes = 1  # worker processes in the run (the master tells the workers)
        self.rate_override: float | None = None  # arrival-rate ladder: requests/s for open-loop workloads
        self.shared = SharedState(lambda: self.processes, lambda: self.rate_override)
        self.in_flight: dict[str, int] = {}  # scenario → requests on the wire in this process
        self.health = ClientHealth()
        self.live = LiveWindow()
        self.history = LiveHistory()
        self.stop_reason = ""  # set by a shape that stopped (or held) on an SLO
        self._workers: dict[str, dict[str, Any]] = {}  # master: latest in-flight and health per worker
        self._history_csv: HistoryCsv | None = None
        self._local_health: dict[str, Any] = {}
        self.link: MasterLink | WorkerLink | None = None
        self.scraper: ServerMetricsScraper | None = None  # the server's /metrics, read by the master or local process
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.quitting.add_listener(self._on_quitting)
        if self.mode == "worker":
            self.link = WorkerLink(runner, self._take_payload, runner.stop, {
                "llmload_processes": lambda data: setattr(self, "processes", max(1, int(data["n"]))),
                "llmload_rate": lambda data: setattr(self, "rate_override", float(data["rate"])),
            })
        elif self.mode == "master":
            self.link = MasterLink(runner, self._ingest)
        self.replay = ReplayLink(self)  # trace replay: one clock for every process, the end of the run

    # -- configuration ---------------------------------------------------------------------------
    def option(self, name: str, default: Any = None) -> Any:
        return option(self.env, name, default)

    @property
    def config(self) -> RunConfig:
        """The run's checked configuration (built on first use in a hand-built Environment)."""
        if self._config is None:
            self._config = build_config(self.env)
        return self._config

    def check_at_init(self) -> None:
        """Fail once, before any user starts: one line, exit code 1."""
        opts = self.env.parsed_options
        require_host = self.mode != "worker" and bool(opts is not None and (opts.headless or opts.autostart))
        try:
            self._config = build_config(self.env, require_host=require_host)
        except ConfigError as e:
            if not _quiet_child():
                sys.stderr.write(f"llmload: {e}\n")
                sys.stderr.flush()
            raise SystemExit(1) from None

    def _check_at_start(self) -> None:
        # The web UI's form or the master's options may have changed what init saw.
        self.config_error = ""
        try:
            self._config = build_config(self.env, require_host=self.mode != "worker")
        except ConfigError as e:
            self._fail(str(e))

    def _fail(self, message: str) -> None:
        if not self.config_error:
            self.config_error = message
            log.error("llmload: %s; the test is stopped", message)
            if self.mode != "worker" and self.env.runner is not None:
                gevent.spawn(self.env.runner.stop)

    def setup_for(self, user_class: type) -> UserSetup:
        """A user class's setup; a user of a run that cannot start stops quietly (logged once)."""
        if self.config_error:
            raise StopUser()
        try:
            return self.config.setup_for(user_class)
        except ConfigError as e:
            self._fail(str(e))
            raise StopUser() from None

    @property
    def run_finished(self) -> bool:
        """No test is running here (none started yet, or the last one has ended)."""
        return self._finished_run

    @property
    def worker_index(self) -> int:
        return int(getattr(self.env.runner, "worker_index", 0) or 0)

    def next_request_id(self) -> str:
        if not self._request_prefix:
            self._request_prefix = f"{self.worker_index}{random.getrandbits(32):08x}"
        self._request_n += 1
        return f"{self._request_prefix}-{self._request_n}"

    def resolve_model(self, host: str, client: ClientOptions) -> str:
        """``--model``, else the first model the server lists, fetched once per process."""
        explicit = self.option("model")
        if explicit:
            return explicit
        with self._model_lock:
            if self._model is None:
                self._model = first_model(host, client) or "default"
        return self._model

    def set_arrival_rate(self, rate: float) -> None:
        """The rate ladder's current rate, here and on every worker."""
        if rate == self.rate_override:
            return
        self.rate_override = rate
        if isinstance(self.link, MasterLink):
            self.link.broadcast("llmload_rate", {"rate": rate})

    # -- the data path ---------------------------------------------------------------------------
    def record(self, rec: RequestRecord) -> None:
        """Account one finished request (called by users, on workers or locally)."""
        env = self.env
        name = rec.meta.scenario
        if rec.status != CANCELLED:
            env.events.request.fire(
                request_type="LLM", name=name, response_time=rec.e2e_ms or 0.0,
                response_length=rec.completion_tokens or 0,
                exception=None if rec.status == OK else rec.status, context={"request_id": rec.meta.request_id},
            )
        if rec.status == OK and env.runner is not None:
            # Extra rows in Locust's table; logged on the entries alone so the Aggregated row
            # (stats.total) still counts each request once.
            stats = env.runner.stats
            if rec.ttft_ms is not None:
                stats.get(name, "TTFT").log(rec.ttft_ms, 0)
            if rec.tpot_ms is not None:
                stats.get(name, "TPOT").log(rec.tpot_ms, 0)
        self.stats.add(rec, track_delta=True)
        self.pending_rows.append(rec.row())

    def record_task(self, task: TaskRecord) -> None:
        """Account one finished agent task (its calls were recorded one by one)."""
        self.stats.add_task(task, task_limit_s(self.config.slos, task.scenario), track_delta=True)

    def _take_payload(self) -> dict[str, Any]:
        rows, self.pending_rows = self.pending_rows, []
        return {"rows": rows, "stats": self.stats.take_delta(), "in_flight": dict(self.in_flight),
                "health": self.health.take(), "index": self.worker_index}

    def _ingest(self, client_id: str, payload: dict[str, Any]) -> None:
        """Master: one worker's report or final message."""
        wire = payload.get("stats") or {}
        self.stats.merge_wire(wire)
        self._feed_itl(wire, time.time())
        self._write_rows(payload.get("rows") or [], from_worker=client_id)
        if "health" in payload:
            self._workers[client_id] = {"in_flight": payload.get("in_flight", {}), "health": payload["health"],
                                        "index": payload.get("index", 0)}

    def _write_rows(self, rows: list, from_worker: str | None = None) -> None:
        if not rows:
            return
        if from_worker is not None and isinstance(self.link, MasterLink):
            col, users = _USERS_COL, self.link.users
            rows = [(*row[:col], users.total_at(row[1], from_worker, row[col]), *row[col + 1:]) for row in rows]
        if self.run_id:
            col, run_id = _RUN_ID_COL, self.run_id
            rows = [(*row[:col], run_id, *row[col + 1:]) for row in rows]
        self.rows_total += len(rows)
        for row in rows:
            self.live.add_row(row)
        if self.writer is not None:
            self.writer.write(rows)
        for listener in self.row_listeners:
            listener(rows)

    def _feed_itl(self, wire: dict[str, Any], now: float) -> None:
        for name, data in wire.items():
            itl = data.get("h", {}).get("itl")
            if itl:
                self.live.add_itl(name, Histogram.from_wire(itl), now)

    # -- the live view ---------------------------------------------------------------------------
    def live_lag_s(self) -> float:
        """How far behind now the live window ends: rows are up to a report interval late."""
        return LOCAL_FLUSH_S + 1.0 if self.mode == "local" else WORKER_REPORT_S + 1.0

    def client_state(self) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """(in-flight requests per scenario, health samples) over every load-generating process."""
        if self.mode != "master":
            health = [{**self._local_health, "worker": 0}] if self._local_health else []
            return dict(self.in_flight), health
        in_flight: dict[str, int] = {}
        for s in self._workers.values():
            for k, v in s.get("in_flight", {}).items():
                in_flight[k] = in_flight.get(k, 0) + v
        health = [{**s["health"], "worker": s.get("index", 0)} for s in self._workers.values() if s.get("health")]
        return in_flight, health

    def sample_history(self, now: float) -> list[dict[str, Any]]:
        """One history row per scenario (and Aggregated) over the live window, to memory and CSV."""
        if self.mode == "local":
            self._local_health = self.health.take()
        in_flight, health = self.client_state()
        users = self.env.runner.user_count if self.env.runner is not None else 0
        rows = self.history.sample(self.live, now, self.live_lag_s(), users, in_flight, health)
        prefix = self.option("csv_prefix")
        if prefix and rows:
            if self._history_csv is None:
                self._history_csv = HistoryCsv(f"{prefix}_llm_history.csv")  # fresh; open until quitting
            self._history_csv.write(rows)
        return rows

    def _sample_history_forever(self) -> None:
        while True:
            gevent.sleep(HISTORY_INTERVAL_S)
            self.sample_history(time.time())

    def _flush_locally(self) -> None:
        while True:
            gevent.sleep(LOCAL_FLUSH_S)
            rows, self.pending_rows = self.pending_rows, []
            self._write_rows(rows)
            self._feed_itl(self.stats.take_delta(), time.time())

    # -- run lifecycle ---------------------------------------------------------------------------
    def _on_test_start(self, environment: Environment, **_kw: Any) -> None:
        self._check_at_start()
        self._finished_run = False
        self.stats.clear()
        self.pending_rows = []
        prefix = self.option("csv_prefix")
        if self.mode != "worker":
            self.run_id = new_run_id(time.time())
            if prefix and self.writer is None:  # a new process's first run: fresh files
                self.writer = RequestsCsv(f"{prefix}_requests.csv")
            if prefix:
                self.manifest = start_manifest(environment, self.config, self.run_id, prefix,
                                               int(getattr(environment.runner, "worker_count", 1)), api_key_from_env())
        self.live = LiveWindow()
        self.history = LiveHistory()
        self.stop_reason = ""
        self._workers = {}
        if self.mode != "master":
            self.health.start()
        if self.mode != "worker":
            self._spawn(self._sample_history_forever)
            if self.scraper is not None:
                self.scraper.stop()
            self.scraper = None if self.config_error or self._config is None else start_scraper(
                self._config.server_metrics, self.env.host, prefix)
        if isinstance(self.link, MasterLink):
            self.link.start()
            self.link.broadcast("llmload_processes", {"n": len(self.link.expected)})
        elif isinstance(self.link, WorkerLink):
            self._spawn(self.link.report_users)
        else:
            self._spawn(self._flush_locally)

    def _spawn(self, fn: Any) -> None:
        self._background = [g for g in self._background if not g.dead]
        self._background.append(gevent.spawn(fn))

    def _stop_background(self) -> None:
        for g in self._background:
            g.kill(block=False)
        self._background = []

    def _on_test_stop(self, environment: Environment, **_kw: Any) -> None:
        self.shared.stop()
        if isinstance(self.link, WorkerLink):
            self._stop_background()
            self.link.send_final()
            self.health.stop()
            return
        if isinstance(self.link, MasterLink):
            self.link.collect_finals(self.env.stop_timeout or 0.0)
        self._finish_run()

    def _finish_run(self) -> None:
        if self._finished_run:
            return
        self._finished_run = True
        self._stop_background()
        if self.scraper is not None:
            self.scraper.stop()
        if self.mode == "local":
            rows, self.pending_rows = self.pending_rows, []
            self._write_rows(rows)
        rows = self.stats.rows()
        prefix = self.option("csv_prefix")
        if prefix and rows:
            write_llm_stats(f"{prefix}_llm_stats.csv", rows)
        self.health.stop()
        if self.mode == "local":
            self.sample_history(time.time())
        if self.manifest is not None:
            self.manifest.finish(time.time())
            self.manifest = None
        if rows and self.option("headless"):
            hit_ratios = self._config.expected_hit_ratios() if self._config is not None else {}
            notes = run_notes(self.history.limited_intervals, self.stop_reason, HISTORY_INTERVAL_S)
            print("\n" + format_summary(rows, hit_ratios) + "\n" + notes + "\n", flush=True)
            if self.writer is not None:
                print(f"llmload: {self.writer.rows_written} request rows in {self.writer.path}", flush=True)

    def _on_quitting(self, environment: Environment, **_kw: Any) -> None:
        if self.mode != "worker":
            self._finish_run()
        for f in (self.writer, self._history_csv):
            if f is not None:
                f.close()
        self.writer = self._history_csv = None
