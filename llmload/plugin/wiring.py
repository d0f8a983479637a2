"""Locust wiring: llmload's options, its checks at init, and Locust's events routed to the modules
that do the work. One :class:`LLMLoadPlugin` per Locust process, at ``environment.llmload``.

* :mod:`llmload.plugin.options.flags`: the argument table (registered here for Locust's parser).
* :mod:`llmload.plugin.run.config`: everything checked once; a bad configuration ends the run at ``init``
  with one line and exit code 1 (in the web UI, at the start of a test).
* The process's role (:mod:`llmload.plugin.cluster.roles`: local, master or worker) does what differs
  between them; nothing here asks which role it is.
* Data path: a user calls :meth:`LLMLoadPlugin.record` for every finished request. Locally the
  row goes to ``PREFIX_requests.csv`` (:mod:`llmload.plugin.output.run_files`, flushed every second) and into the
  LLM stats (:mod:`llmload.metrics.stats`); on a worker rows and histogram deltas travel to the master
  (:mod:`llmload.plugin.cluster.links`, messages in :mod:`llmload.plugin.cluster.messages`), which writes
  them and merges the stats.
* The live view (:mod:`llmload.plugin.output.live`) is fed by every row the master or local process writes and
  sampled every 2 s into ``PREFIX_llm_history.csv``, the LLM tab and the dashboard.
* At the end a headless run prints the summary (:mod:`llmload.plugin.output.end_of_run`).
* The web UI and the load shapes read the run through :class:`llmload.plugin.web.views.RunViews`.

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

from llmload.health import gcpolicy
from llmload.health.calibration import load_calibration
from llmload.health.fleet import ClientView
from llmload.health.sampler import ClientHealth
from llmload.metrics.agent_tasks import TaskRecord
from llmload.metrics.record import RequestRecord
from llmload.metrics.slo import task_limit_s
from llmload.metrics.stats import LLMStats
from llmload.plugin.cluster import messages
from llmload.plugin.cluster.role_for import make_role
from llmload.plugin.options.flags import add_arguments, option
from llmload.plugin.output.live import HISTORY_INTERVAL_S, LiveHistory, LiveWindow
from llmload.plugin.output.locust_table import to_locust
from llmload.plugin.output.run_files import RunFiles
from llmload.plugin.output.run_manifest import RunIdentity
from llmload.plugin.output.span_export import SpanExport
from llmload.plugin.run.config import ConfigError, RunConfig
from llmload.plugin.run.interrupt import deliver_sigint_to_main
from llmload.plugin.run.isolated import run_each
from llmload.plugin.run.isolation_setup import install_isolation
from llmload.plugin.run.option_scope import install_applied_shape
from llmload.plugin.run.server_hooks import ServerHooks
from llmload.plugin.run.startup import ConfigGate
from llmload.plugin.run.user_setup import UserSetup
from llmload.plugin.users.trace_replay import ReplayLink
from llmload.plugin.web.views import RunViews
from llmload.server_metrics.scrape import ServerMetricsScraper, start_gpu_scraper, start_scraper
from llmload.shapes.control import CONTROL_ATTR
from llmload.shapes.isolation import PhaseMarks
from llmload.shapes.warmup import WarmupRows
from llmload.shapes.warmup_shape import WarmupShape
from llmload.transport import ClientOptions, first_model
from llmload.workload.shared import SharedState

log = logging.getLogger("llmload")


events.init_command_line_parser.add_listener(add_arguments)


@events.init.add_listener
def on_init(environment: Environment, **_kw: Any) -> None:
    deliver_sigint_to_main()  # Ctrl+C must not kill the master's listener mid-message
    plugin = get_plugin(environment)
    plugin.check_at_init()
    plugin.install_warmup()
    if environment.web_ui is not None:
        from llmload.plugin.web.webui import install

        install(environment, plugin.views)


def get_plugin(environment: Environment) -> LLMLoadPlugin:
    plugin = getattr(environment, "llmload", None)
    if plugin is None:  # also an Environment built by hand (tests, library use)
        plugin = environment.llmload = LLMLoadPlugin(environment)  # type: ignore[attr-defined]
    return plugin


class LLMLoadPlugin:
    """One per Locust process; see the module docstring."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        self.stats = LLMStats()
        self.pending_rows: list[tuple] = []  # rows not yet written or shipped (the worker link holds this list)
        self.rows_total = 0
        self.run = RunIdentity()  # the run id on every row, PREFIX_run.json; workers get the id from the master
        self._model: str | None = None
        self._model_lock = gevent.lock.Semaphore()
        self._request_prefix = ""
        self._request_n = 0
        self._finished_run = True
        self.rate_override: float | None = None  # arrival-rate ladder: requests/s for open-loop workloads
        self.shared = SharedState(lambda: self.processes, lambda: self.rate_override)
        self.in_flight: dict[str, int] = {}  # scenario → requests on the wire in this process
        self.health = ClientHealth()
        self.live = LiveWindow()
        self.history = LiveHistory(started=time.time(), interval_s=HISTORY_INTERVAL_S)
        self.stop_reason = ""  # set by a shape that stopped (or held) on an SLO
        self.warmup_rows = WarmupRows()  # --warmup-seconds: marks the warm-up's rows (the process that writes them)
        self.phase_marks = PhaseMarks()  # --isolation: marks each row with its phase, likewise
        self.clients = ClientView()  # every load-generating process's health, the run's stalls
        self.scraper: ServerMetricsScraper | None = None  # the server's /metrics, read by the master or local process
        self.gpu_scraper: ServerMetricsScraper | None = None  # the DCGM exporters (--gpu-metrics), likewise
        self.files = RunFiles(self.run, on_failure=lambda e: self.role.file_failed(e))
        self.role = make_role(self)
        self.hooks = ServerHooks(self)  # --reset-cache, --profile-step: the leading process's calls to the server
        self.spans: SpanExport | None = None  # --otlp-endpoint: every request as an OpenTelemetry span
        self.gate = ConfigGate(environment, self.role.leads)  # the configuration, checked at init and each start
        self.role.handle(messages.RATE, lambda data, _node_id: setattr(
            self, "rate_override", None if data["rate"] is None else float(data["rate"])))
        if not self.role.leads:  # a worker: the master's warm-up marks the worker's own copy of its rows too
            self.role.handle(messages.WARMUP, lambda data, _node_id: self._warmup_from_master(data))
            self.role.handle(messages.PHASE, lambda data, _node_id: self.phase_marks.begin(str(data["label"]),
                                                                                        float(data["at"])))
        ev = environment.events
        gcpolicy.install(ev)
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.quitting.add_listener(self._on_quitting)
        self.replay = ReplayLink(environment, self.role)  # trace replay: one clock for every process
        self.views = RunViews(self, self.role)
        setattr(environment, CONTROL_ATTR, self.views)  # what the load shapes ask (llmload.shapes.control)
        if getattr(environment.runner, "worker_state", None) in ("spawning", "running"):
            self._on_test_start(environment)  # a late worker's first spawn fires test_start before Locust's init

    # -- configuration ---------------------------------------------------------------------------
    def option(self, name: str, default: Any = None) -> Any:
        return option(self.env, name, default)

    @property
    def config(self) -> RunConfig:
        """The run's checked configuration (built on first use in a hand-built Environment)."""
        return self.gate.config

    @property
    def config_error(self) -> str:
        return self.gate.error

    def check_at_init(self) -> None:
        self.gate.check_at_init()
        opts = self.env.parsed_options
        if self.role.leads and opts is not None and (opts.headless or opts.autostart):
            try:  # before anything starts: a run that asked for a cold cache and cannot have one never starts
                self.hooks.reset_at_init()
            except ConfigError as e:
                sys.stderr.write(f"llmload: {e}\n")
                raise SystemExit(1) from None

    def install_warmup(self) -> None:
        """``--warmup-seconds``: the warm-up in front of the run's shape (or of the plain run), where
        shapes run (the master or the only process); ``--isolation``'s shape first."""
        env = self.env
        if not self.role.leads or self.gate.error or isinstance(env.shape_class, WarmupShape):
            return
        install_isolation(env, self.config.isolation)  # --isolation: its phases are the run's shape
        install_applied_shape(env, self.config.applied_shape, self.config.shape)  # --steps, no shape in the locustfile
        plan = self.config.warmup
        if plan is not None:
            env.shape_class = WarmupShape(env.shape_class, plan)
            env.shape_class.runner = env.runner

    def setup_for(self, user_class: type) -> UserSetup:
        return self.gate.setup_for(user_class)

    def client_for(self, host: str, client: ClientOptions) -> ClientOptions:
        return self.gate.client_for(host, client)

    @property
    def run_finished(self) -> bool:
        """No test is running here (none started yet, or the last one has ended)."""
        return self._finished_run

    @property
    def worker_index(self) -> int:
        return self.role.worker_index

    @property
    def processes(self) -> int:
        """Worker processes in the run (the master tells the workers)."""
        return self.role.processes

    def next_request_id(self) -> str:
        if not self._request_prefix:
            # a letter first: "0769103e-90" would read as a number in pandas or a spreadsheet
            self._request_prefix = f"w{self.worker_index}{random.getrandbits(32):08x}"
        self._request_n += 1
        rid = f"{self._request_prefix}-{self._request_n}"
        self.role.announce(rid)
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

    def _warmup_from_master(self, data: dict[str, Any]) -> None:
        if data["ended_at"] is None or self.warmup_rows.until is None:  # a worker that joined late: from the end
            self.warmup_rows.begin(float(data["seconds"]))
        if data["ended_at"] is not None:
            self.warmup_rows.end(float(data["ended_at"]))

    def set_arrival_rate(self, rate: float | None) -> None:
        """The rate ladder's (or the warm-up's) current rate, here and on every worker (None: each
        workload's own rate)."""
        if rate == self.rate_override:
            return
        self.rate_override = rate
        self.role.send(messages.RATE, messages.RATE.payload(rate=rate))

    # -- the data path ---------------------------------------------------------------------------
    def record(self, rec: RequestRecord) -> None:
        """Account one finished request (called by users, on workers or locally)."""
        to_locust(self.env, rec)
        self.stats.add(rec, track_delta=True)
        self.health.finished(rec)
        self.pending_rows.append(rec.row())
        if self.spans is not None:
            self.spans.export(rec)  # after the request, from its record: nothing per token

    def record_task(self, task: TaskRecord) -> None:
        """Account one finished agent task (its calls were recorded one by one)."""
        self.stats.add_task(task, task_limit_s(self.config.slos, task.scenario), track_delta=True)

    def write_rows(self, rows: list) -> None:
        """Rows that are final (the master's or a local process's): the live view and the requests CSV."""
        if not rows:
            return
        rows = self.run.pass_on(self.phase_marks.stamp(self.warmup_rows.stamp(rows)))  # listeners see the phase
        self.rows_total += len(rows)
        for row in rows:
            self.live.add_row(row)
        self.files.write_requests(rows)

    def take_rows(self, n: int) -> list[tuple]:
        """Up to ``n`` of the oldest queued rows (what a caller takes is no longer queued)."""
        rows = self.pending_rows[:n]
        del self.pending_rows[:n]
        return rows

    # -- the live view ---------------------------------------------------------------------------
    def sample_history(self, now: float) -> list[dict[str, Any]]:
        """One history row per scenario (and Aggregated) over the live window, to memory and CSV."""
        if self.role.generates_load:  # this process's own health among the clients' (a local run)
            self.clients.add(self.role.name, self.health.take(sum(self.in_flight.values())), {}, 0)
        in_flight, health = self.role.client_state()
        users = self.env.runner.user_count if self.env.runner is not None else 0
        rows = self.history.sample(self.live, now, self.role.live_lag_s(), users, in_flight, health)
        self.files.write_history(rows)
        return rows

    def _sample_history_forever(self) -> None:
        while True:
            gevent.sleep(HISTORY_INTERVAL_S)
            self.sample_history(time.time())

    # -- run lifecycle ---------------------------------------------------------------------------
    def _on_test_start(self, environment: Environment, **_kw: Any) -> None:
        role = self.role
        self.gate.check_at_start()
        self._finished_run = False
        self.stats.clear()
        self.pending_rows.clear()  # the worker link holds this very list
        prefix = self.option("csv_prefix")
        self.live = LiveWindow()
        self.history = LiveHistory(started=time.time(), interval_s=HISTORY_INTERVAL_S)
        self.stop_reason = ""
        self.clients = ClientView()
        run_each("the start of the test", (
            ("the run's files", lambda: self.files.start(environment, self.config, prefix, role.name,
                                                          writes_requests=role.leads)),
            ("the client health", self._start_health),
            ("the server-metrics scraper", lambda: self._start_scraper(prefix)),
            ("the server hooks", lambda: role.leads and not self.gate.error and self.hooks.test_started()),
            ("the span export", self._start_spans),
            ("the role", role.start)))

    def _start_spans(self) -> None:
        endpoint = self.option("otlp_endpoint")
        if endpoint and self.role.generates_load and self.spans is None and not self.gate.error:
            self.spans = SpanExport(endpoint, self.option("otlp_header", []), self.run)

    def _start_health(self) -> None:
        if self.role.generates_load:
            self.health.calibration = load_calibration(self.option("calibration"))
            self.health.start()

    def _start_scraper(self, prefix: str | None) -> None:
        if not self.role.leads:
            return
        self.role.spawn(self._sample_history_forever)
        for old in (self.scraper, self.gpu_scraper):
            if old is not None:
                old.stop()
        checked = self.gate.checked
        self.scraper = self.gpu_scraper = None
        if not self.gate.error and checked is not None:
            self.scraper = start_scraper(checked.server_metrics, self.env.host, prefix)
            self.gpu_scraper = start_gpu_scraper(checked.server_metrics, prefix)

    def _on_test_stop(self, environment: Environment, **_kw: Any) -> None:
        run_each("the stop of the test", (("the shared workload state", self.shared.stop),
                                          ("the server hooks", self.hooks.test_stopped)))
        if self.role.stop():  # a worker sends its final data here: nothing before may keep it from running
            self._finish_run()
        spans = self.spans
        if spans is not None:  # after the rows: a worker's final message goes first
            run_each("the stop of the test", (("the span export", spans.flush),))

    def _finish_run(self) -> None:
        if not self._finished_run:
            self._finished_run = True
            scraper, gpus = self.scraper, self.gpu_scraper
            run_each("the end of the run", (
                ("the profiler's stop", self.hooks.join),
                ("the background loops", self.role.stop_background),
                ("the server-metrics scraper", lambda: scraper is not None and scraper.stop()),
                ("the GPU-metrics scraper", lambda: gpus is not None and gpus.stop()),
                ("the run's files and summary", lambda: self.role.finish_run(HISTORY_INTERVAL_S))))

    def _on_quitting(self, environment: Environment, **_kw: Any) -> None:
        self.role.quitting()
        if self.role.leads:
            self._finish_run()
        self.files.close()
