"""How a run ends on the master or a local process: the final files and the printed summary, a
file that cannot be written (a full disk), and a stop by signal.

* :func:`finish_run`: rows still queued, ``PREFIX_llm_stats.csv``, the history's last row, the
  summary (errors first when they dominated, then the table, backoff, lost workers, the client)
  and exit code 1 when a worker vanished with rows the master never got.
* :func:`output_failed`: one message naming the file and the reason; the rows written before
  stay whole (:class:`llmload.plugin.run_files.RequestsCsv`); the run is stopped (exit code 1).
* :func:`stop_before_quitting`: SIGTERM or Ctrl-C mid-run quits Locust without stopping the test
  first; stop it the normal way so every worker's final rows (locally: every in-flight request,
  as cancelled) arrive before the files close.

Usage (from :class:`llmload.plugin.wiring.LLMLoadPlugin`)::

    finish_run(plugin, 2.0); output_failed(plugin, error); stop_before_quitting(plugin)
    plugin.writer = open_requests_csv(plugin, "runs/chat_requests.csv")
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import gevent

from llmload.plugin.config import ConfigError
from llmload.plugin.end_of_run import end_of_run_text
from llmload.plugin.links import MasterLink
from llmload.plugin.run_files import OutputError, RequestsCsv, write_llm_stats

if TYPE_CHECKING:
    from llmload.plugin.wiring import LLMLoadPlugin

log = logging.getLogger("llmload")


def output_failed(plugin: LLMLoadPlugin, error: Exception) -> None:
    if plugin.output_error:
        return
    plugin.output_error = str(error)
    log.error("llmload: %s; the run is stopped", error)
    env = plugin.env
    env.process_exit_code = 1
    if plugin.writer is not None:
        plugin.writer.close()
        plugin.writer = None
    runner = env.runner
    if runner is not None and plugin.mode != "worker":
        opts = env.parsed_options
        gevent.spawn(runner.quit if opts is not None and opts.headless else runner.stop)


def open_requests_csv(plugin: LLMLoadPlugin, path: str) -> RequestsCsv | None:
    """The run's PREFIX_requests.csv; None (and the run stopped) when it cannot be made."""
    try:
        return RequestsCsv(path)
    except OutputError as e:
        output_failed(plugin, e)
        return None


def stop_before_quitting(plugin: LLMLoadPlugin) -> None:
    runner = plugin.env.runner
    if runner is not None and runner.state not in ("stopped", "stopping", "ready"):
        runner.stop()


def finish_run(plugin: LLMLoadPlugin, interval_s: float) -> None:
    if plugin.mode == "local":
        plugin.write_rows(plugin.take_rows(len(plugin.pending_rows)))  # the worker link's list stays bound
    table = plugin.stats.rows()
    prefix = plugin.option("csv_prefix")
    if prefix and table and not plugin.output_error:
        try:
            write_llm_stats(f"{prefix}_llm_stats.csv", table)
        except OutputError as e:
            output_failed(plugin, e)
    plugin.health.stop()
    if plugin.mode == "local":
        plugin.sample_history(time.time())
    if plugin.history_csv is not None:
        plugin.history_csv.close()
        plugin.history_csv = None
    plugin.run.finish(time.time())  # PREFIX_run.json gets its end
    lost = plugin.link.lost() if isinstance(plugin.link, MasterLink) else []
    if lost and plugin.env.process_exit_code is None:
        plugin.env.process_exit_code = 1  # rows the server saw are missing here: not a clean run
    if table and (plugin.option("headless") or plugin.option("autostart")):  # unattended: say how it went
        try:
            hit_ratios = plugin.config.expected_hit_ratios()
        except ConfigError:
            hit_ratios = {}
        print("\n" + end_of_run_text(table, hit_ratios, plugin.history, plugin.stop_reason, interval_s, lost,
                                     prefix, plugin.output_error, plugin.clients.stall_notes()) + "\n", flush=True)
        if plugin.writer is not None:
            print(f"llmload: {plugin.writer.rows_written} request rows in {plugin.writer.path}", flush=True)
