"""The inference engine's own Prometheus metrics, read during a load test. Pure, no I/O.

One module per step of the data flow: ``parse`` (a ``/metrics`` body → samples), ``engines``
(the known engines' metric tables) and ``known`` (engine metric names → common names),
``window`` (rates, gauge summaries and percentiles over a window of scrapes), ``series``
(scrapes over time: CSV rows, a fleet combined, the live sample), ``verdict`` (what limited a
load step, server-side). The scraping loop (``llmload.server_metrics.scrape``) and the report
(``llmload.report.sections.server``) live elsewhere and call these.

Usage::

    from llmload.server_metrics import parse_exposition, snapshot, aggregate_step, server_verdict

    snaps = [(t, snapshot(parse_exposition(body))) for t, body in scrapes]
    stats = aggregate_step(snaps, start, end)
    verdict = server_verdict(stats, client=step_row)
"""

from llmload.server_metrics.known import (
    COMMON,
    DEFAULT_PATHS,
    ENGINES,
    MappedSample,
    ServerSnapshot,
    detect_engine,
    map_samples,
    snapshot,
)
from llmload.server_metrics.parse import MAX_EXPOSITION_BYTES, Exposition, ExpositionError, parse_exposition
from llmload.server_metrics.step_stats import StepServerStats, aggregate_step
from llmload.server_metrics.verdict import Verdict, server_verdict, token_rate_warning

__all__ = [
    "COMMON", "DEFAULT_PATHS", "ENGINES", "MAX_EXPOSITION_BYTES", "Exposition", "ExpositionError", "MappedSample",
    "ServerSnapshot", "StepServerStats", "Verdict", "aggregate_step", "detect_engine", "map_samples",
    "parse_exposition", "server_verdict", "snapshot", "token_rate_warning",
]
