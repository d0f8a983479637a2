"""Locust wiring: llmload's options, its checks at init, and Locust's events routed to the modules
that do the work. One :class:`LLMLoadPlugin` per Locust process, at ``environment.llmload``.

* :mod:`llmload.plugin.options`: the argument table (registered here for Locust's parser).
* :mod:`llmload.plugin.config`: everything checked once; a bad configuration ends the run at ``init``
  with one line and exit code 1 (in the web UI, at the start of a test).
* Data path: a user calls :meth:`LLMLoadPlugin.record` for every finished request. Locally the
  row goes to ``PREFIX_requests.csv`` (:mod:`llmload.plugin.run_files`, flushed every second) and into the
  LLM stats (:mod:`llmload.metrics.stats`); on a worker rows and histogram deltas travel to the master
  (:mod:`llmload.plugin.links`), which writes them and merges the stats.
* The live view (:mod:`llmload.plugin.live`) is fed by every row the master or local process writes and
  sampled every 2 s into ``PREFIX_llm_history.csv``, the LLM tab and the dashboard.
* At the end a headless run prints the summary (:mod:`llmload.plugin.end_of_run`).

Usage (what a locustfile does by importing :class:`llmload.LLMUser`)::

    plugin = get_plugin(environment)
    plugin.record(request_record)
"""

from __future__ import annotations

import logging
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

from llmload.files import COL
from llmload.health import gcpolicy
from llmload.health.calibration import load_calibration
from llmload.health.fleet import ClientView
from llmload.health.sampler import ClientHealth
from llmload.metrics.agent_tasks import TaskRecord
from llmload.metrics.record import CANCELLED, OK, RequestRecord
from llmload.metrics.slo import task_limit_s
from llmload.metrics.stats import LLMStats
from llmload.net.limits import check_fd_budget
from llmload.net.turns import let_io_run
from llmload.plugin.config import ConfigError, RunConfig, UserSetup, build_config
from llmload.plugin.links import WORKER_REPORT_S, MasterLink, WorkerLink
from llmload.plugin.live import LiveHistory, LiveWindow
from llmload.plugin.live_feed import sample_history
from llmload.plugin.options import add_arguments, option
from llmload.plugin.run_end import finish_run, open_requests_csv, output_failed, stop_before_quitting
from llmload.plugin.run_files import HistoryCsv, OutputError, RequestsCsv
from llmload.plugin.run_manifest import RunIdentity
from llmload.plugin.startup import checked_config, quiet_child
from llmload.plugin.trace_replay import ReplayLink
from llmload.plugin.worker_rows import WorkerRows, master_lost
from llmload.server_metrics.scrape import ServerMetricsScraper, start_scraper
from llmload.transport import ClientOptions, first_model
from llmload.workload.shared import SharedState

log = logging.getLogger("llmload")

HISTORY_INTERVAL_S = 2.0
LOCAL_FLUSH_S = 1.0
ROWS_PER_SLICE = 100  # rows written per loop turn (~0.5 ms at 1,024 streams)
_USERS_COL = COL.users

events.init_command_line_parser.add_listener(add_arguments)


@events.init.add_listener
def on_init(environment: Environment, **_kw: Any) -> None:
    plugin = get_plugin(environment)
    plugin.check_at_init()
    if environment.web_ui is not None:
        from llmload.plugin.webui import install

        install(environment, plugin)


def get_plugin(environment: Environment) -> LLMLoadPlugin:
    plugin = getattr(environment, "llmload", None)
    if plugin is None:  # also an Environment built by hand (tests, library use)
        plugin = environment.llmload = LLMLoadPlugin(environment)  # type: ignore[attr-defined]
    return plugin


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
        self.run = RunIdentity()  # the run id on every row, PREFIX_run.json; workers get the id from the master
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
        self.clients = ClientView()  # every load-generating process's health, the run's stalls
        self.history_csv: HistoryCsv | None = None
        self.link: MasterLink | WorkerLink | None = None
        self.scraper: ServerMetricsScraper | None = None  # the server's /metrics, read by the master or local process
        self.worker_rows = WorkerRows(None)
        self.output_error = ""  # a file of the run could not be written: the run was stopped
        ev = environment.events
        gcpolicy.install(ev)
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.quitting.add_listener(self._on_quitting)
        if self.mode == "worker":
            self.link = WorkerLink(runner, self._take_payload, runner.stop, self.pending_rows, {
                "llmload_processes": self._on_run_info,
                "llmload_rate": lambda data: setattr(self, "rate_override", float(data["rate"])),
            }, on_shipped=self.rows_shipped)
        elif self.mode == "master":
            self.link = MasterLink(runner, self._ingest, self._run_info)
        self.replay = ReplayLink(self)  # trace replay: one clock for every process, the end of the run
        if getattr(runner, "worker_state", None) in ("spawning", "running"):
            self._on_test_start(environment)  # a late worker's first spawn fires test_start before Locust's init

    def _run_info(self) -> dict[str, Any]:  # the master tells each worker how many share the load, its --csv
        assert isinstance(self.link, MasterLink)
        return {"n": max(1, len(self.link.expected)), "csv": self.option("csv_prefix") or "", "run_id": self.run.run_id}

    def _on_run_info(self, data: dict[str, Any]) -> None:
        self.processes = max(1, int(data["n"]))
        self.worker_rows.master_prefix = data.get("csv") or None
        self.run.run_id = data.get("run_id") or ""

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
        try:
            self._config = checked_config(self.env, self.mode, at_init=True)
        except ConfigError as e:
            if not quiet_child():
                sys.stderr.write(f"llmload: {e}\n")
                sys.stderr.flush()
            raise SystemExit(1) from None

    def _check_at_start(self) -> None:
        # The web UI's form or the master's options may have changed what init saw.
        self.config_error = ""
        try:
            self._config = checked_config(self.env, self.mode, at_init=False)
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
        check_fd_budget(self.env.runner.user_count if self.env.runner is not None else 0)  # a socket per user
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
        rid = f"{self._request_prefix}-{self._request_n}"
        if isinstance(self.link, WorkerLink):
            self.link.announce(rid)  # before it is written: the master can count it if this worker vanishes
        return rid

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
        self.health.tokens += rec.completion_tokens or 0
        self.pending_rows.append(rec.row())

    def rows_shipped(self, rows: list[tuple]) -> None:
        """A worker keeps the rows it sends on its own disk (PREFIX_requests.workerN.csv)."""
        if isinstance(self.link, WorkerLink):
            self.worker_rows.write(self.run.stamp(rows), self.worker_index, self.link.others)  # the master's run id

    def record_task(self, task: TaskRecord) -> None:
        """Account one finished agent task (its calls were recorded one by one)."""
        self.stats.add_task(task, task_limit_s(self.config.slos, task.scenario), track_delta=True)

    def _take_payload(self) -> dict[str, Any]:
        rows = self.take_rows(len(self.pending_rows))
        self.rows_shipped(rows)
        return {"rows": rows, "stats": self.stats.take_delta(), "in_flight": dict(self.in_flight),
                "health": self.health.take(sum(self.in_flight.values())), "index": self.worker_index}

    def _ingest(self, client_id: str, payload: dict[str, Any]) -> None:
        """Master: one worker's report or final message."""
        wire = payload.get("stats") or {}
        self.stats.merge_wire(wire)
        self.live.add_itl_delta(wire, time.time())
        if isinstance(self.link, MasterLink):
            self.link.rows_arrived(client_id, payload.get("rows") or [])
        self.write_rows(payload.get("rows") or [], from_worker=client_id)
        if "health" in payload:
            self.clients.add(client_id, payload["health"], payload.get("in_flight", {}), payload.get("index", 0))

    def write_rows(self, rows: list, from_worker: str | None = None) -> None:
        if not rows:
            return
        if from_worker is not None and isinstance(self.link, MasterLink):
            col, users = _USERS_COL, self.link.users
            rows = [(*row[:col], users.total_at(row[1], from_worker, row[col]), *row[col + 1:]) for row in rows]
        rows = self.run.pass_on(rows)
        self.rows_total += len(rows)
        for row in rows:
            self.live.add_row(row)
        if self.writer is not None:
            try:
                self.writer.write(rows)
            except OutputError as e:
                output_failed(self, e)

    # -- the live view ---------------------------------------------------------------------------
    def live_lag_s(self) -> float:
        """How far behind now the live window ends: rows are up to a report interval late."""
        return LOCAL_FLUSH_S + 1.0 if self.mode == "local" else WORKER_REPORT_S + 1.0

    def sample_history(self, now: float) -> list[dict[str, Any]]:
        """One history row per scenario (and Aggregated) over the live window, to memory and CSV."""
        return sample_history(self, now)

    def _sample_history_forever(self) -> None:
        while True:
            gevent.sleep(HISTORY_INTERVAL_S)
            sample_history(self, time.time())

    def take_rows(self, n: int) -> list[tuple]:
        """Up to ``n`` of the oldest queued rows (what a caller takes is no longer queued)."""
        rows = self.pending_rows[:n]
        del self.pending_rows[:n]
        return rows

    def _flush_locally(self) -> None:
        # A slice of rows per loop turn: a second's rows at 1,024 streams held the loop for 2-5 ms
        # in one piece. Rows not yet taken stay queued if the run ends meanwhile.
        while True:
            gevent.sleep(LOCAL_FLUSH_S)
            for _ in range(len(self.pending_rows) // ROWS_PER_SLICE):
                self.write_rows(self.take_rows(ROWS_PER_SLICE))
                let_io_run()
            self.write_rows(self.take_rows(ROWS_PER_SLICE))
            self.live.add_itl_delta(self.stats.take_delta(), time.time())

    # -- run lifecycle ---------------------------------------------------------------------------
    def _on_test_start(self, environment: Environment, **_kw: Any) -> None:
        self._check_at_start()
        self._finished_run = False
        self.stats.clear()
        self.pending_rows.clear()  # the worker link holds this very list
        prefix = self.option("csv_prefix")
        if prefix and self.writer is None and self.mode != "worker":
            self.writer = open_requests_csv(self, f"{prefix}_requests.csv")
        self.run.start(environment, self.config, prefix, self.mode)
        self.live = LiveWindow()
        self.history = LiveHistory()
        self.stop_reason = ""
        self.clients = ClientView()
        if self.mode != "master":
            self.health.calibration = load_calibration(self.option("calibration"))
            self.health.start()
        if self.mode != "worker":
            self._spawn(self._sample_history_forever)
            if self.scraper is not None:
                self.scraper.stop()
            self.scraper = None if self.config_error or self._config is None else start_scraper(
                self._config.server_metrics, self.env.host, prefix)
        if isinstance(self.link, MasterLink):
            self.link.start()
            self.link.broadcast("llmload_processes", self._run_info())
        elif isinstance(self.link, WorkerLink):
            self.worker_rows.own_prefix = prefix or None
            self._spawn(self.link.report_users)
            self._spawn(self.link.ship_rows)
            lost_after = self.config.faults.master_lost_after_s
            self._spawn(lambda: self.link.watch_master(lost_after, lambda s: gevent.spawn(master_lost, self, s)))
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
        if not self._finished_run:
            self._finished_run = True
            self._stop_background()
            if self.scraper is not None:
                self.scraper.stop()
            finish_run(self, HISTORY_INTERVAL_S)

    def _on_quitting(self, environment: Environment, **_kw: Any) -> None:
        if self.mode != "worker":
            if not self._finished_run:
                stop_before_quitting(self)
            self._finish_run()
        else:
            self.worker_rows.close()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
