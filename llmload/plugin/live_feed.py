"""What the master or local process feeds its live view with: in-flight requests and client health
over every load-generating process, and the history sampled from the window (to memory, the LLM
tab and ``PREFIX_llm_history.csv``).

Usage (from :class:`llmload.plugin.wiring.LLMLoadPlugin`)::

    in_flight, health = client_state(plugin)
    rows = sample_history(plugin, time.time())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmload.plugin.run_end import output_failed
from llmload.plugin.run_files import HistoryCsv, OutputError

if TYPE_CHECKING:
    from llmload.plugin.wiring import LLMLoadPlugin


def client_state(plugin: LLMLoadPlugin) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """(in-flight requests per scenario, health samples) over every load-generating process."""
    in_flight, health = plugin.clients.state()
    if plugin.mode != "master":
        return dict(plugin.in_flight), health
    return in_flight, health


def sample_history(plugin: LLMLoadPlugin, now: float) -> list[dict[str, Any]]:
    """One history row per scenario (and Aggregated) over the live window, to memory and CSV."""
    if plugin.mode == "local":
        plugin.clients.add("local", plugin.health.take(sum(plugin.in_flight.values())), {}, 0)
    in_flight, health = client_state(plugin)
    users = plugin.env.runner.user_count if plugin.env.runner is not None else 0
    rows = plugin.history.sample(plugin.live, now, plugin.live_lag_s(), users, in_flight, health)
    prefix = plugin.option("csv_prefix")
    if prefix and rows and not plugin.output_error:
        try:
            if plugin.history_csv is None:
                plugin.history_csv = HistoryCsv(f"{prefix}_llm_history.csv")
            plugin.history_csv.write(rows)
        except (OutputError, OSError) as e:
            plugin.history_csv = None
            output_failed(plugin, e)
    return rows
