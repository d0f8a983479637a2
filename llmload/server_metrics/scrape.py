"""Reading the server's own Prometheus metrics, and the GPUs' (dcgm-exporter), during a run: the
scraping loop (I/O).

One process scrapes: the master in a distributed run, the only process otherwise (the plugin
starts a scraper at each test start and stops it at the end; workers never scrape). Every
``interval_s`` one greenlet per endpoint fetches its ``/metrics``; the body is parsed, mapped to
the common names (:mod:`llmload.server_metrics`), appended to ``PREFIX_server_metrics.csv`` and
folded into a :class:`~llmload.server_metrics.series.FleetSeries` for the live view.

A metrics endpoint must never slow or break the load, so:

* each fetch is bounded in time (``timeout_s``, at most the interval: a dead endpoint costs one
  waiting greenlet, never a blocked loop) and in size (the ``Content-Length`` is checked first,
  then at most ``MAX_EXPOSITION_BYTES + 1`` bytes are read: a runaway body is dropped, not kept);
* the parsing (pure-Python ``prometheus_client``, ~23 ms for a 137 kB vLLM body) runs in the
  scraping greenlet in slices of about 0.5 ms, each followed by a loop turn, so the users' streams
  are read between slices (a pool thread would not help: it holds the GIL for 5-ms switch
  intervals, which showed as a 3.5-ms loop stall at every scrape);
* the first failure of an endpoint is one warning; later ones are only ``up`` 0 rows in the CSV;
* a CSV that cannot be written (a full disk) is one error line: the rows before it stay, no more
  are written, the live view keeps its samples and the rest of the run goes on.

The same loop reads the GPUs: :data:`GPU` (``--gpu-metrics URL``, a DCGM exporter per node) keeps
every series (the ``DCGM_*`` fields) under the exporter's names (:mod:`llmload.server_metrics.gpu`) in
``PREFIX_gpu_metrics.csv`` (the same long format), with the same bounds; a run without it says so
in one line. What a scraper reads is its :class:`MetricsKind`: the parse, and whether its scrapes
feed the live view.

Without ``--server-metrics`` the target host is probed once per test, at the paths the known
engines use (``/metrics``, then TensorRT-LLM's ``/prometheus/metrics``); the first that answers
with Prometheus text is scraped, and a host that has none is told once, as information.

Usage::

    scraper = start_scraper(config.server_metrics, host, csv_prefix)   # the plugin, at test start; or:
    scraper = ServerMetricsScraper(["http://gpu:8000/metrics"], interval_s=2.0,
                                   csv_path="runs/x_server_metrics.csv")   # or urls=[], host=...
    scraper.start()
    scraper.samples[-1]      # the newest live sample: running, waiting, kv_usage_pct, ...
    scraper.stop()
    gpus = start_gpu_scraper(config.server_metrics, csv_prefix)   # None without --gpu-metrics
"""

from __future__ import annotations

import csv
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import IO, Any

import gevent
import gevent.event

from llmload import files
from llmload.net.turns import let_io_run
from llmload.server_metrics import (
    DEFAULT_PATHS,
    ExpositionError,
    ServerSnapshot,
)
from llmload.server_metrics.fetch import GPU, MAX_TIMEOUT_S, SERVER, MetricsKind, ScrapeError, fetch, parse_in_slices
from llmload.server_metrics.nvml import NvmlUnavailable, nvml_body
from llmload.server_metrics.series import CSV_HEADER, FleetSeries, csv_rows, failed_rows, live_point

log = logging.getLogger("llmload")

LIVE_WINDOW_S = 10.0
KEEP_POINTS = 600  # combined scrapes kept for the live view (20 min at 2 s)
KEEP_SAMPLES = 20_000
NVML = "nvml"  # --gpu-metrics nvml: this machine's GPUs through NVML (llmload.server_metrics.nvml)


def candidate_urls(host: str) -> list[str]:
    """Where the known engines serve Prometheus text on ``host`` (its scheme and address)."""
    parts = urllib.parse.urlsplit(host)
    return [urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", "")) for path in DEFAULT_PATHS]


class ServerMetricsScraper:
    """See the module docstring. ``urls`` empty: probe ``host`` at the known paths."""

    def __init__(self, urls: list[str], interval_s: float = 2.0, csv_path: str | None = None,
                 host: str | None = None, kind: MetricsKind = SERVER) -> None:
        self.kind = kind
        self.urls = list(urls)
        self.host = host
        self.interval_s = interval_s
        self.timeout_s = min(interval_s, MAX_TIMEOUT_S)
        self.csv_path = csv_path
        self.series = FleetSeries(keep=KEEP_POINTS)
        self.samples: list[dict[str, Any]] = []
        """One live sample per tick (see :func:`~llmload.server_metrics.series.live_point`)."""
        self.engines: dict[str, str | None] = {}
        self.scrapes = 0
        self.failures = 0
        self.rows_written = 0
        self.busy_s = 0.0
        """Time spent per scrape between the body's arrival and the CSV write, summed (parse, map, write)."""
        self._warned: set[str] = set()
        self._file: IO[str] | None = None
        self._csv: Any = None
        self.write_error = ""
        """Why the CSV is no longer written ('' while it is)."""
        self._greenlet: gevent.Greenlet | None = None
        self._stopped = False
        self._stop = gevent.event.Event()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """End the loop and close the CSV (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        if self._greenlet is not None:
            # the scrape in flight finishes and is written (each is bounded by timeout_s); only a loop
            # that still does not end is killed
            self._greenlet.join(timeout=self.timeout_s + 2.0)
            self._greenlet.kill(block=True, timeout=1.0)
        self._close()
        if self.scrapes:
            where = f", {self.rows_written} rows in {self.csv_path}" if self.rows_written else ""
            log.info("llmload: %s: %d scrape(s) of %s, %d failed%s", self.kind.what, self.scrapes,
                     ", ".join(self.urls), self.failures, where)

    @property
    def running(self) -> bool:
        return self._greenlet is not None and not self._greenlet.dead

    # -- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        if not self.urls and not self._discover():
            return
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.tick(time.time())
            next_tick += self.interval_s
            delay = next_tick - time.monotonic()
            if delay < 0:  # a tick ran long: start again from now rather than bunching up
                next_tick, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def tick(self, t: float) -> None:
        """Scrape every endpoint once (in parallel), then write and fold in what came back."""
        # Each scrape's duration counts from the tick, not from when its greenlet got to run: on a busy
        # client that wait is the larger part of how long after ``t`` the engine wrote its numbers.
        began = time.perf_counter()
        jobs = {url: gevent.spawn(self._scrape, url, t, began) for url in self.urls}
        gevent.joinall(list(jobs.values()))
        results = {url: job.value if job.successful() else (None, failed_rows(t, url, 0.0))
                   for url, job in jobs.items()}
        let_io_run()
        t0 = time.perf_counter()
        self._write([row for _, rows in results.values() for row in rows])
        let_io_run()
        if not self.kind.live:
            self.busy_s += time.perf_counter() - t0
            return
        self.series.add(t, {url: snap for url, (snap, _) in results.items()})
        point = live_point(self.series.points, t, LIVE_WINDOW_S)
        if point is not None:
            point["endpoints_up"] = sum(self.series.answered.values())
            point["endpoints"] = len(self.urls)
            self.samples.append(point)
            del self.samples[:-KEEP_SAMPLES]
        self.busy_s += time.perf_counter() - t0

    def _scrape(self, url: str, t: float, t0: float) -> tuple[ServerSnapshot | None, list[tuple[Any, ...]]]:
        self.scrapes += 1
        try:
            sent = time.time()
            body = self._local_gpus() if url == NVML else fetch(url, self.timeout_s)
            if self.kind.stamp_answer:
                t = (sent + time.time()) / 2.0
            t1 = time.perf_counter()
            engine, snap, mapped = self.kind.parse(body, url)
        except (ScrapeError, ExpositionError) as e:
            self.failures += 1
            self._warn(url, str(e))
            return None, failed_rows(t, url, time.perf_counter() - t0)
        self.engines[url] = engine
        let_io_run()
        rows = csv_rows(t, url, mapped, engine=engine, duration_s=time.perf_counter() - t0)
        self.busy_s += time.perf_counter() - t1
        return snap, rows

    @staticmethod
    def _local_gpus() -> bytes:
        try:
            return nvml_body()
        except NvmlUnavailable as e:
            raise ScrapeError(str(e)) from None

    def _warn(self, url: str, reason: str) -> None:
        if url in self._warned:
            return
        self._warned.add(url)
        log.warning("llmload: %s from %s: %s; still trying every %g s, without repeating this warning",
                    self.kind.what, url, reason, self.interval_s)

    def _discover(self) -> bool:
        """Probe the target host at the known paths; keep the first that answers with metrics."""
        if not self.host:
            return False
        reasons = []
        for url in candidate_urls(self.host):
            try:
                engine, snap, mapped = parse_in_slices(fetch(url, self.timeout_s), url)
            except (ScrapeError, ExpositionError) as e:
                reasons.append(f"{url}: {str(e)[:160]}")
                continue
            if mapped:
                self.urls = [url]
                log.info("llmload: reading server metrics from %s (%s) every %g s", url,
                         engine or "unknown engine: kept raw", self.interval_s)
                return True
            reasons.append(f"{url}: no samples")
        log.info("llmload: no server metrics on the target host (%s); pass --server-metrics URL to read them "
                 "elsewhere, or --no-server-metrics to not look", "; ".join(reasons))
        return False

    def _write(self, rows: list[tuple[Any, ...]]) -> None:
        if not self.csv_path or not rows or self.write_error:
            return
        try:
            if self._file is None:
                os.makedirs(os.path.dirname(os.path.abspath(self.csv_path)), exist_ok=True)
                new = not os.path.exists(self.csv_path) or os.path.getsize(self.csv_path) == 0
                self._file = open(self.csv_path, "a", newline="", encoding="utf-8")  # noqa: SIM115
                self._csv = csv.writer(self._file)
                if new:
                    self._csv.writerow(CSV_HEADER)
            self._csv.writerows(rows)
            self._file.flush()
        except OSError as e:
            self.write_error = f"{e.strerror or e} (errno {e.errno})"
            log.error("llmload: %s: cannot write: %s; the %d %s rows written before stay readable, no "
                      "more are written (the live view still gets them); the run goes on", self.csv_path,
                      self.write_error, self.rows_written, self.kind.what)
            self._close()
            return
        self.rows_written += len(rows)

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:  # the write that failed is still buffered: it was said already
                pass


def start_scraper(setup: Any, host: str | None, csv_prefix: str | None) -> ServerMetricsScraper | None:
    """A running scraper for one test, or None when scraping is off or there is nowhere to look.
    ``setup`` is the run's :class:`~llmload.plugin.options.option_checks.ServerMetricsSetup` (``urls``,
    ``interval_s``, ``off``)."""
    if setup.off or not (setup.urls or host):
        return None
    path = files.path(csv_prefix, files.SERVER_METRICS) if csv_prefix else None
    scraper = ServerMetricsScraper(list(setup.urls), setup.interval_s, path, host=host)
    scraper.start()
    return scraper


def start_gpu_scraper(setup: Any, csv_prefix: str | None) -> ServerMetricsScraper | None:
    """A running scraper of the DCGM exporters ``setup.gpu_urls`` (and of this machine's GPUs for
    ``nvml``) for one test, or None (and one line saying the run has no GPU telemetry)."""
    urls = list(getattr(setup, "gpu_urls", ()))
    if NVML in urls:
        try:
            nvml_body()
        except NvmlUnavailable as e:
            log.info("llmload: --gpu-metrics nvml: %s; this machine's GPUs are left out", e)
            urls.remove(NVML)
            if not urls:
                return None  # that line said it
    if not urls:
        log.info("llmload: no GPU metrics (pass --gpu-metrics URL, a DCGM exporter's /metrics per node, to put the "
                 "GPUs in the report)")
        return None
    path = files.path(csv_prefix, files.GPU_METRICS) if csv_prefix else None
    scraper = ServerMetricsScraper(urls, setup.interval_s, path, kind=GPU)
    log.info("llmload: reading GPU metrics from %s every %g s", ", ".join(urls), setup.interval_s)
    scraper.start()
    return scraper
