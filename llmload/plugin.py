"""Locust wiring: command-line args, per-request events, worker → master shipping, the writers.

Data path: a user calls :meth:`LLMLoadPlugin.record` for every finished request. Locally the
row goes to ``PREFIX_requests.csv`` (flushed every second) and into the LLM stats. On a worker
rows and histogram deltas ride Locust's own 3-second report (``report_to_master``) and a final
message; the master writes them and merges the stats.

Not losing rows at stop (../shared/HOTPATH.md): after ``-t`` expires the master stops listening
0.5 s after it tells workers to quit, while they may still be finishing streams. So the
master, in its ``test_stop``, asks every worker that has not yet sent its final data to stop
(message ``llmload_stop``); a worker's ``test_stop`` (its users are done then) sends
``llmload_final`` with everything left; the master waits for every worker's final message,
bounded by the stop timeout plus a margin, before it writes the summary.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import time
from typing import Any

import gevent
import gevent.lock
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from llmload.health import ClientHealth, describe
from llmload.histogram import Histogram
from llmload.live import LiveWindow
from llmload.output import HistoryCsv, RequestsCsv, write_llm_stats
from llmload.record import CANCELLED, CSV_COLUMNS, OK, RequestRecord
from llmload.stats import AGGREGATED, LLMStats, format_summary
from llmload.workload.shared import SharedState

log = logging.getLogger("llmload")

FINAL_MARGIN_S = 15.0
WORKER_REPORT_S = 3.0  # Locust's WORKER_REPORT_INTERVAL
HISTORY_INTERVAL_S = 2.0
HISTORY_KEEP = 20_000
_USERS_COL = CSV_COLUMNS.index("users")
LOCAL_FLUSH_S = 1.0
USERS_SAMPLE_S = 0.1
TRANSPORTS = ("fast", "openai")
ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@events.init_command_line_parser.add_listener
def add_arguments(parser: Any) -> None:
    g = parser.add_argument_group("llmload", "LLM load options (each also as an LLMLOAD_* variable)")
    g.add_argument("--scenario", env_var="LLMLOAD_SCENARIO", default="",
                   help="scenario name (or YAML file) the users run; overrides the locustfile's")
    g.add_argument("--model", env_var="LLMLOAD_MODEL", default="",
                   help="model name to request (default: the first one the server's /v1/models lists)")
    g.add_argument("--transport", env_var="LLMLOAD_TRANSPORT", default="fast", choices=TRANSPORTS,
                   help="fast: llmload's streaming client (default); openai: the official SDK")
    g.add_argument("--endpoint", env_var="LLMLOAD_ENDPOINT", default="", choices=["", *ENDPOINTS],
                   help="chat (/v1/chat/completions) or completions (/v1/completions)")
    g.add_argument("--input-tokens", env_var="LLMLOAD_INPUT_TOKENS", default="",
                   help="prompt length in tokens: N or LOW-HIGH (overrides the scenario)")
    g.add_argument("--output-tokens", env_var="LLMLOAD_OUTPUT_TOKENS", default="",
                   help="max_tokens: N or LOW-HIGH (overrides the scenario)")
    g.add_argument("--ignore-eos", env_var="LLMLOAD_IGNORE_EOS", action="store_true", default=False,
                   help="send vLLM's ignore_eos so every reply is exactly max_tokens long")
    g.add_argument("--slo", env_var="LLMLOAD_SLO", action="append", default=[],
                   help="service-level objective [SCENARIO:]METRIC=VALUE, e.g. ttft_p95_ms=2000 (repeatable)")
    g.add_argument("--request-timeout", env_var="LLMLOAD_REQUEST_TIMEOUT", type=float, default=600.0,
                   help="seconds without a first token or without progress before a request times out")
    g.add_argument("--steps", env_var="LLMLOAD_STEPS", default="",
                   help="step shape: user count of each step, e.g. 4,8,16,32 (locustfiles with a StepLoadShape)")
    g.add_argument("--step-seconds", env_var="LLMLOAD_STEP_SECONDS", type=float, default=0.0,
                   help="step shape: seconds each step lasts")
    g.add_argument("--step-spawn-rate", env_var="LLMLOAD_STEP_SPAWN_RATE", type=float, default=0.0,
                   help="step shape: users started per second when a step begins")
    g.add_argument("--slo-stop-after", env_var="LLMLOAD_SLO_STOP_AFTER", type=float, default=0.0,
                   help="shapes: act when an SLO stays broken this many seconds on the live window (0: off)")
    g.add_argument("--slo-stop-action", env_var="LLMLOAD_SLO_STOP_ACTION", default="", choices=["", "stop", "hold"],
                   help="stop: end the run (default); hold: go back to the last good step and hold it")
    g.add_argument("--ramp-users", env_var="LLMLOAD_RAMP_USERS", type=int, default=0,
                   help="ramp shape: users at the top of the ramp")
    g.add_argument("--ramp-seconds", env_var="LLMLOAD_RAMP_SECONDS", type=float, default=0.0,
                   help="ramp shape: seconds to get there")
    g.add_argument("--ramp-hold-seconds", env_var="LLMLOAD_RAMP_HOLD_SECONDS", type=float, default=0.0,
                   help="ramp shape: seconds to stay at the top")
    g.add_argument("--rate-steps", env_var="LLMLOAD_RATE_STEPS", default="",
                   help="rate ladder shape: arrival rates (requests/s) of open-loop workloads, e.g. 2,4,8")
    g.add_argument("--seed", env_var="LLMLOAD_SEED", type=int, default=0,
                   help="workload seed; each worker and user draws its own reproducible stream from it")


@events.init.add_listener
def on_init(environment: Environment, **_kw: Any) -> None:
    from llmload.report.slo import parse_slo

    for text in getattr(environment.parsed_options, "slo", None) or []:
        try:
            parse_slo(text)
        except ValueError as e:
            raise SystemExit(f"llmload: {e}") from None
    plugin = environment.llmload = LLMLoadPlugin(environment)  # type: ignore[attr-defined]
    if environment.web_ui is not None:
        from llmload.webui import install

        install(environment, plugin)


def get_plugin(environment: Environment) -> LLMLoadPlugin:
    plugin = getattr(environment, "llmload", None)
    if plugin is None:  # an Environment built by hand (tests, library use)
        plugin = environment.llmload = LLMLoadPlugin(environment)  # type: ignore[attr-defined]
    return plugin


class LLMLoadPlugin:
    """One per Locust process; see the module docstring."""

    def __init__(self, environment: Environment) -> None:
        self.env = environment
        runner = environment.runner
        self.mode = "worker" if isinstance(runner, WorkerRunner) else (
            "master" if isinstance(runner, MasterRunner) else "local")
        self.stats = LLMStats()
        self.pending_rows: list[tuple] = []
        self.writer: RequestsCsv | None = None
        self.rows_total = 0
        self._model: str | None = None
        self._model_lock = gevent.lock.Semaphore()
        self._request_prefix = ""
        self._request_n = 0
        self._finals: set[str] = set()
        self._expected: set[str] = set()
        self._users: dict[str, tuple[list[float], list[int]]] = {}  # master: worker → (times, counts)
        self._background: list[gevent.Greenlet] = []
        self._finished_run = True
        self.processes = 1  # worker processes in the run (the master tells the workers)
        self.shared = SharedState(lambda: self.processes, lambda: self.rate_override)
        self.rate_override: float | None = None  # arrival-rate ladder: requests/s for open-loop workloads
        self.in_flight: dict[str, int] = {}  # scenario → requests on the wire in this process
        self.health = ClientHealth()
        self.live = LiveWindow()
        self.history: list[dict[str, Any]] = []  # master/local: one entry per scenario per interval
        self.limited_intervals: list[str] = []  # master/local: who limited the client, when
        self.stop_reason = ""  # set by a shape that stopped (or held) on an SLO
        self._workers: dict[str, dict[str, Any]] = {}  # master: latest in-flight and health per worker
        self._history_csv: Any = None
        self._local_health: dict[str, Any] = {}
        ev = environment.events
        ev.test_start.add_listener(self._on_test_start)
        ev.test_stop.add_listener(self._on_test_stop)
        ev.quitting.add_listener(self._on_quitting)
        if self.mode == "worker":
            ev.report_to_master.add_listener(self._on_report_to_master)
            runner.register_message("llmload_stop", self._on_stop_request, concurrent=True)
            runner.register_message("llmload_processes", self._on_processes)
            runner.register_message("llmload_rate", self._on_rate)
        elif self.mode == "master":
            ev.worker_report.add_listener(self._on_worker_report)
            runner.register_message("llmload_final", self._on_final)
            runner.register_message("llmload_users", self._on_users)

    # -- options -------------------------------------------------------------------------------
    def option(self, name: str, default: Any = None) -> Any:
        opts = self.env.parsed_options
        value = getattr(opts, name, None) if opts is not None else None
        return default if value in (None, "", []) else value

    @property
    def worker_index(self) -> int:
        return int(getattr(self.env.runner, "worker_index", 0) or 0)

    def next_request_id(self) -> str:
        if not self._request_prefix:
            self._request_prefix = f"{self.worker_index}{random.getrandbits(32):08x}"
        self._request_n += 1
        return f"{self._request_prefix}-{self._request_n}"

    def resolve_model(self, host: str, api_key: str | None) -> str:
        """``--model``, else the first model the server lists, fetched once per process."""
        explicit = self.option("model")
        if explicit:
            return explicit
        with self._model_lock:
            if self._model is None:
                self._model = _first_model(host, api_key) or "default"
        return self._model

    # -- the data path -------------------------------------------------------------------------
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

    def _take_payload(self) -> dict[str, Any]:
        rows, self.pending_rows = self.pending_rows, []
        return {"rows": rows, "stats": self.stats.take_delta(), "in_flight": dict(self.in_flight),
                "health": self.health.take(), "index": self.worker_index}

    def _write_rows(self, rows: list, from_worker: str | None = None) -> None:
        if not rows:
            return
        if from_worker is not None:
            col = _USERS_COL
            rows = [(*row[:col], self.total_users_at(row[1], from_worker, row[col]), *row[col + 1:]) for row in rows]
        self.rows_total += len(rows)
        for row in rows:
            self.live.add_row(row)
        if self.writer is not None:
            self.writer.write(rows)

    def total_users_at(self, t: float, worker: str, own: int) -> int:
        """Master: users over all workers at Unix time ``t``: the row's own worker count (exact)
        plus every other worker's last reported count (sampled every 0.1 s)."""
        total = own or 0
        for client_id, (times, counts) in self._users.items():
            if client_id == worker:
                continue
            i = bisect.bisect_right(times, t) - 1
            if i >= 0:
                total += counts[i]
        return total

    def _open_writer(self) -> None:
        prefix = self.option("csv_prefix")
        if prefix and self.writer is None and self.mode != "worker":
            self.writer = RequestsCsv(f"{prefix}_requests.csv")

    # -- run lifecycle -------------------------------------------------------------------------
    def _on_test_start(self, environment: Environment, **_kw: Any) -> None:
        self._finished_run = False
        self.stats.clear()
        self.pending_rows = []
        self._finals = set()
        self._open_writer()
        self.live = LiveWindow()
        self.history = []
        self.limited_intervals = []
        self.stop_reason = ""
        self._workers = {}
        if self.mode != "master":
            self.health.start()
        if self.mode != "worker":
            self._spawn(self._sample_history)
        if self.mode == "master":
            self._expected = set(environment.runner.clients.keys())
            self._users = {}
            for client_id in self._expected:
                environment.runner.send_message("llmload_processes", {"n": len(self._expected)}, client_id=client_id)
        elif self.mode == "worker":
            self._spawn(self._report_users)
        elif self.mode == "local":
            self._spawn(self._flush_locally)

    def _spawn(self, fn: Any) -> None:
        self._background = [g for g in self._background if not g.dead]
        self._background.append(gevent.spawn(fn))

    def _stop_background(self) -> None:
        for g in self._background:
            g.kill(block=False)
        self._background = []

    def _flush_locally(self) -> None:
        while True:
            gevent.sleep(LOCAL_FLUSH_S)
            rows, self.pending_rows = self.pending_rows, []
            self._write_rows(rows)
            self._feed_itl(self.stats.take_delta(), time.time())

    def _feed_itl(self, wire: dict[str, Any], now: float) -> None:
        for name, data in wire.items():
            itl = data.get("h", {}).get("itl")
            if itl:
                self.live.add_itl(name, Histogram.from_wire(itl), now)

    def live_lag_s(self) -> float:
        """How far behind now the live window ends: rows are up to a report interval late."""
        return LOCAL_FLUSH_S + 1.0 if self.mode == "local" else WORKER_REPORT_S + 1.0

    def client_state(self) -> tuple[int, list[dict[str, Any]]]:
        """(in-flight requests, health samples) over every load-generating process."""
        if self.mode == "master":
            states = list(self._workers.values())
            return sum(sum(s.get("in_flight", {}).values()) for s in states), [
                {**s["health"], "worker": s.get("index", 0)} for s in states if s.get("health")]
        return sum(self.in_flight.values()), [{**self._local_health, "worker": 0}] if self._local_health else []

    def in_flight_by_scenario(self) -> dict[str, int]:
        if self.mode != "master":
            return dict(self.in_flight)
        out: dict[str, int] = {}
        for s in self._workers.values():
            for k, v in s.get("in_flight", {}).items():
                out[k] = out.get(k, 0) + v
        return out

    def _sample_history(self) -> None:
        while True:
            gevent.sleep(HISTORY_INTERVAL_S)
            self.sample_history(time.time())

    def sample_history(self, now: float) -> list[dict[str, Any]]:
        """One history row per scenario (and Aggregated) over the live window, to memory and CSV."""
        if self.mode == "local":
            self._local_health = self.health.take()
        self.live.prune(now)
        rows = self.live.snapshot(now, self.live_lag_s())
        in_flight, health = self.client_state()
        by_scenario = self.in_flight_by_scenario()
        limited = [h for h in health if h.get("limited")]
        if limited:
            self.limited_intervals.append(", ".join(f"worker {h['worker']}: {describe(h)}" for h in limited))
        users = self.env.runner.user_count if self.env.runner is not None else 0
        out = []
        for r in rows:
            r = {k: v for k, v in r.items() if k != "_stats"}
            r.update({
                "time": round(now, 3), "users": users,
                "in_flight": in_flight if r["scenario"] == AGGREGATED or len(rows) == 1
                else by_scenario.get(r["scenario"], 0),
                "client_cpu_max": max((h["cpu"] for h in health), default=None),
                "client_lag_p99_ms_max": max((h["lag_p99_ms"] for h in health), default=None),
                "client_limited": bool(limited),
            })
            out.append(r)
        self.history.extend(out)
        del self.history[:-HISTORY_KEEP]
        self._write_history(out)
        return out

    def _write_history(self, rows: list[dict[str, Any]]) -> None:
        prefix = self.option("csv_prefix")
        if not prefix or not rows:
            return
        if self._history_csv is None:
            self._history_csv = HistoryCsv(f"{prefix}_llm_history.csv")
        self._history_csv.write(rows)

    def _report_users(self) -> None:
        # Only the master knows the total user count, and only from what workers tell it: each
        # worker reports its own count on every change, so rows can carry the total.
        runner = self.env.runner
        last = -1
        while True:
            n = runner.user_count
            if n != last:
                runner.send_message("llmload_users", {"t": time.time(), "n": n})
                last = n
            gevent.sleep(USERS_SAMPLE_S)

    def _on_test_stop(self, environment: Environment, **_kw: Any) -> None:
        self.shared.stop()
        if self.mode == "worker":
            self._stop_background()
            payload = self._take_payload()
            self.health.stop()
            payload["final"] = True
            try:
                environment.runner.send_message("llmload_final", payload)
            except Exception as e:  # the master is gone: nothing left to send to
                log.error("llmload: could not send the final rows to the master: %s", e)
            return
        if self.mode == "master":
            self._collect_finals()
        self._finish_run()

    def _collect_finals(self) -> None:
        runner = self.env.runner
        missing = self._expected - self._finals
        for client_id in missing:
            try:
                runner.send_message("llmload_stop", None, client_id=client_id)
            except Exception as e:
                log.warning("llmload: cannot ask worker %s to stop: %s", client_id, e)
        deadline = time.monotonic() + (self.env.stop_timeout or 0.0) + FINAL_MARGIN_S
        while self._expected - self._finals and time.monotonic() < deadline:
            gevent.sleep(0.05)
        missing = self._expected - self._finals
        if missing:
            log.warning("llmload: no final data from worker(s) %s; rows they had not yet reported are missing",
                        ", ".join(sorted(missing)))

    def _finish_run(self) -> None:
        if self._finished_run:
            return
        self._finished_run = True
        self._stop_background()
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
        if self._history_csv is not None:
            self._history_csv.close()
            self._history_csv = None
        if rows and self.option("headless"):
            print("\n" + format_summary(rows, self.expected_hit_ratios()) + "\n" + self.run_notes() + "\n",
                  flush=True)
            if self.writer is not None:
                print(f"llmload: {self.writer.rows_written} request rows in {self.writer.path}", flush=True)

    def _on_quitting(self, environment: Environment, **_kw: Any) -> None:
        if self.mode != "worker":
            self._finish_run()
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    # -- worker side ----------------------------------------------------------------------------
    def _on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        data["llmload"] = self._take_payload()

    def _on_rate(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self.rate_override = float(msg.data["rate"])

    def set_arrival_rate(self, rate: float) -> None:
        """The rate ladder's current rate, here and on every worker."""
        if rate == self.rate_override:
            return
        self.rate_override = rate
        if self.mode == "master":
            for client_id in list(self.env.runner.clients.keys()):
                self.env.runner.send_message("llmload_rate", {"rate": rate}, client_id=client_id)

    def _scenario_specs(self) -> list[Any]:
        from llmload.workload.scenario import ScenarioError, load_scenario_cached

        out = []
        sources = [self.option("scenario")] + [getattr(c, "scenario", "") for c in self.env.user_classes]
        seen = set()
        for src in sources:
            if not src or not str(src).endswith((".yaml", ".yml")) or src in seen:
                continue
            seen.add(src)
            try:
                out.append(load_scenario_cached(src))
            except ScenarioError as e:
                log.warning("llmload: %s", e)
        return out

    def scenario_shape(self) -> dict[str, Any]:
        """The ``shape:`` settings of the scenario file(s) in use (the first that has one)."""
        for spec in self._scenario_specs():
            if spec.shape:
                return spec.shape
        return {}

    def live_slos(self) -> list[Any]:
        """SLOs to watch live: --slo, plus each workload's ``slo:`` (scoped to it)."""
        from llmload.live import LiveSLO
        from llmload.report.slo import parse_slo

        slos = []
        for text in self.option("slo", []) or []:
            s = parse_slo(text)
            slos.append(LiveSLO(s.metric, s.limit, s.scenario))
        for spec in self._scenario_specs():
            for w in spec.workloads:
                slos += [LiveSLO(metric, limit, w.name) for metric, limit in w.slo.items()]
        return slos

    def _on_processes(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self.processes = max(1, int(msg.data["n"]))

    def _on_stop_request(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        environment.runner.stop()  # its test_stop sends llmload_final once the users are done

    # -- master side ----------------------------------------------------------------------------
    def _ingest(self, client_id: str, payload: dict[str, Any]) -> None:
        self._expected.add(client_id)
        wire = payload.get("stats") or {}
        self.stats.merge_wire(wire)
        self._feed_itl(wire, time.time())
        self._write_rows(payload.get("rows") or [], from_worker=client_id)
        if "health" in payload:
            self._workers[client_id] = {"in_flight": payload.get("in_flight", {}), "health": payload["health"],
                                        "index": payload.get("index", 0)}

    def _on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        payload = data.get("llmload")
        if payload:
            self._ingest(client_id, payload)

    def _on_users(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        times, counts = self._users.setdefault(msg.node_id, ([], []))
        times.append(float(msg.data["t"]))
        counts.append(int(msg.data["n"]))

    def _on_final(self, environment: Environment, msg: Any, **_kw: Any) -> None:
        self._ingest(msg.node_id, msg.data or {})
        self._finals.add(msg.node_id)


    def run_notes(self) -> str:
        notes = []
        if self.limited_intervals:
            n = len(self.limited_intervals)
            notes.append(f"CLIENT-LIMITED: the load generator, not the server, limited the run during {n} of the "
                         f"{HISTORY_INTERVAL_S:g}-second intervals (last: {self.limited_intervals[-1]}); add worker "
                         "processes (--processes) before trusting these numbers")
        else:
            notes.append("client: not limited (CPU and event-loop lag stayed under the thresholds)")
        if self.stop_reason:
            notes.append(self.stop_reason)
        return "\n".join(notes)

    def expected_hit_ratios(self) -> dict[str, float]:
        """Per workload with prefix groups: the hit ratio its scenario file makes possible."""
        out: dict[str, float] = {}
        for spec in self._scenario_specs():
            for w in spec.workloads:
                ratio = w.expected_prefix_hit_ratio()
                if ratio is not None:
                    out[w.name] = ratio
        return out


def _first_model(host: str, api_key: str | None) -> str | None:
    import json
    import urllib.request

    url = host.rstrip("/")
    url = (url[:-3] if url.endswith("/v1") else url) + "/v1/models"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            data = json.loads(resp.read())
        return str(data["data"][0]["id"])
    except Exception as e:  # no /v1/models: the server may not need a model name
        log.warning("llmload: could not read %s (%s); sending model 'default' (set --model)", url, e)
        return None


def api_key_from_env() -> str | None:
    return os.environ.get("LLMLOAD_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
