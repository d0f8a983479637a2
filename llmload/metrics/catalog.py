"""The metric catalog: every latency metric declared once, with every name a user reads it by.
Pure: names only, no I/O.

One metric has one *name* (``ttft``, ``itl_max``) and one *label* (``TTFT``, ``ITL max``); every other
spelling is derived from those two and a statistic (``p50``, ``p95``, ``mean``, ``max``)::

    where                                   spelling                    from
    PREFIX_requests.csv column              ttft_ms                     Metric.row_column
    histogram key (ScenarioStats.hist)      ttft                        Metric.name
    PREFIX_llm_stats.csv columns (vLLM)     mean_ttft_ms, p99_ttft_ms   Metric.stats_column(stat)
    live rows, PREFIX_llm_history.csv,      ttft_p95_ms                 Metric.key(stat)
      live.json/history.json, --slo         (SLO: ttft_p95_ms=2000)
    LLM tab, dashboard, summary, report     TTFT p95                    Metric.title(stat)
    report.json step entry                  ttft_ms: {p50, ..., n}      Metric.row_column

Exporters iterate :data:`METRICS` (stats.py's llm_stats columns, slo.py's accepted names and help,
the live rows and the LLM tab's columns, the dashboard's charts via ``llmload/metrics.json``, the
end-of-run table, the report's step table); none of them types a metric's name.

To add a latency metric: add one ``Metric(...)`` to :data:`METRICS` below (its place in the tuple is
its display order, and the order of its llm_stats columns). Outside this file only the measurement
itself is left: compute the value in ``record.StreamAccumulator.finish`` and, for a per-request
metric, add a ``record.RequestRecord`` field named as its ``row_column``, that name in
``record.CSV_COLUMNS`` and the value in ``RequestRecord.row`` (same position). A per-request metric is
then histogrammed, merged across workers, written to llm_stats, the live rows, the history CSV and
the dashboard, accepted by ``--slo`` and reported, with no further edit (the tab, the end-of-run
table, the report's step table, ``compare`` and the vLLM export show it when its ``tab``,
``summary``, ``report``, ``headline`` or ``vllm`` say so). A metric without a row column (like
``itl``, fed per chunk) also needs its feed, which carries ``itl`` by name today:
``scenario_stats.ScenarioStats.add``'s ``record_many`` and ``live.LiveWindow.add_itl_delta``.
tests/unit/test_metric_catalog.py then checks that every surface shows it.

Usage::

    from llmload.metrics import catalog
    m = catalog.BY_NAME["ttft"]
    m.row_column, m.key("p95"), m.stats_column("p50"), m.title("p95")
    # "ttft_ms", "ttft_p95_ms", "median_ttft_ms", "TTFT p95"
    [m.name for m in catalog.METRICS if m.slo]      # the stems --slo accepts
    catalog.RENAMED["worst_stall_ms"]              # "itl_max_max_ms": an old key, still written for one release
"""

from __future__ import annotations

from dataclasses import dataclass

STATS_QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))
"""The percentiles PREFIX_llm_stats.csv has for every metric (besides mean and max)."""
REPORT_PERCENTILES = (50, 90, 95, 99)
"""The percentiles of a report.json step entry (``ttft_ms: {p50, p90, p95, p99, mean, n, ci95}``)."""
_VLLM_STAT = {"p50": "median"}  # vLLM bench serve's spelling of a statistic in a column name


@dataclass(frozen=True)
class Metric:
    """One metric, declared once; every spelling of it is derived (see the module docstring)."""

    name: str
    """The one name: histogram key, SLO stem, and the stem of every column and key (``ttft``)."""
    label: str
    """What a reader sees in tables and charts (``TTFT``)."""
    description: str
    """One sentence for docs and help: what is measured, over what."""
    row_column: str | None = None
    """Its PREFIX_requests.csv column (``ttft_ms``); None: not a per-request value (``itl``, per chunk)."""
    unit: str = "ms"
    live: tuple[str, ...] = ("p50", "p95", "p99")
    """Statistics of the live window: live rows, PREFIX_llm_history.csv, the dashboard's series."""
    tab: tuple[str, ...] = ()
    """Of ``live``, those the LLM tabs show (it has room for few)."""
    tab_default: tuple[str, ...] = ()
    """Of ``tab``, those in the first LLM tab (at most 10 columns in all); the rest are on the "LLM details" tab."""
    summary: tuple[str, ...] = ()
    """Statistics in the end-of-run table a headless run prints."""
    report: tuple[str, ...] = ()
    """Statistics in the report's step table (report.json has them all, for a row metric)."""
    slo: bool = True
    """``--slo`` and scenario ``slo:`` accept ``{name}_{pNN|mean|median}_{unit}``."""
    dashboard: bool = True
    """The live dashboard draws a chart of its ``live`` statistics."""
    differs_from: str = ""
    """The dashboard shows its chart only once a sample differs from this metric's: TTFT visible is
    TTFT itself for a plain chat (no reasoning before the content), a copy not worth a panel."""
    headline: bool = False
    """A panel of the report's latency charts (throughput vs latency, percentiles per step, compare's curves) and
    ``llmload compare``'s columns at matched load."""
    vllm: str | None = None
    """Its name in ``vllm bench serve --save-result`` JSON (``e2el``), for the report's vLLM export."""

    def key(self, stat: str) -> str:
        """Live rows, history CSV, live.json and SLO spelling: ``ttft_p95_ms``."""
        return f"{self.name}_{stat}_{self.unit}"

    def stats_column(self, stat: str) -> str:
        """PREFIX_llm_stats.csv column (vLLM's names): ``mean_ttft_ms``, ``median_ttft_ms``, ``p99_tpot_ms``."""
        return f"{_VLLM_STAT.get(stat, stat)}_{self.name}_{self.unit}"

    def stats_columns(self) -> tuple[str, ...]:
        """Every llm_stats column of the metric, in file order (mean, median, p90, p95, p99, max)."""
        return tuple(self.stats_column(s) for s in ("mean", *(q for q, _ in STATS_QUANTILES), "max"))

    def title(self, stat: str, unit: bool = False) -> str:
        """Table and chart heading: ``TTFT p95`` (``TTFT p95 (ms)`` with ``unit``, the LLM tab's form); a label
        that ends in its statistic says it once (``ITL max``, not ``ITL max max``)."""
        name = self.label if self.label.endswith(f" {stat}") else f"{self.label} {stat}"
        return name + (f" ({self.unit})" if unit else "")


METRICS: tuple[Metric, ...] = (
    Metric("ttft", "TTFT", "time to first token: t0 to the first event carrying output (content, reasoning, tool "
           "calls; role-only and empty chunks never count), over ok requests", row_column="ttft_ms",
           live=("p50", "p95", "p99", "mean"), tab=("p50", "p95", "p99"), tab_default=("p50", "p95"),
           summary=("p50", "p95", "p99"), report=("p50", "p95", "p99"), headline=True, vllm="ttft"),
    Metric("ttft_visible", "TTFT visible", "t0 to the first non-empty content (after any reasoning), over ok "
           "requests", row_column="ttft_visible_ms", report=("p50", "p95", "p99"), differs_from="ttft"),
    Metric("tpot", "TPOT", "time per output token after the first: (E2E - TTFT) / (output tokens - 1), over ok "
           "requests with at least 2 output tokens", row_column="tpot_ms", tab=("p50", "p95"), tab_default=("p50",),
           summary=("p50", "p95", "p99"), report=("p50", "p95", "p99"), headline=True,
           vllm="tpot"),
    Metric("itl", "ITL", "inter-token latency: every gap between consecutive output events of every ok stream "
           "(per chunk, not per request; gaps into and inside a coalesced read left out)", tab=("p99",),
           tab_default=("p99",), summary=("p99",), slo=False),
    Metric("itl_max", "ITL max", "a request's largest gap between output events (its worst stall), over ok "
           "requests", row_column="itl_max_ms", live=("max",), tab=("max",), report=("p99",)),
    Metric("e2e", "E2E", "end to end: t0 to the end of the stream (for a failed request: to the moment it "
           "failed), over ok requests", row_column="e2e_ms", summary=("p50", "p99"), report=("p50", "p95", "p99"),
           vllm="e2el"),
)
"""Every latency metric, in display order (also the order of their PREFIX_llm_stats.csv columns)."""

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
ROW_METRICS: tuple[Metric, ...] = tuple(m for m in METRICS if m.row_column)
"""The per-request metrics: a PREFIX_requests.csv column each, histogrammed from the row."""
HISTOGRAM_KEYS: tuple[str, ...] = tuple(m.name for m in METRICS)
SLO_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS if m.slo)
HEADLINE: tuple[Metric, ...] = tuple(m for m in METRICS if m.headline)
"""The metrics the report charts against throughput and ``compare`` lines up at matched load (TTFT, TPOT)."""

TASK = Metric("task", "task time", "an agent task's time from its first call to its answer, over tasks that did not "
              "fail (seconds)", unit="s", live=(), dashboard=False)
"""Agent task time: an SLO stem (``task_p95_s``) and llm_stats columns (``p95_task_s``, agent_tasks.py), not a
request metric."""

INTENDED_HIT_TOLERANCE = 0.10
"""``prefix_hit_rate``: how far the server-reported cached share may be from the intended one (in
share of prompt tokens) before the summary and the report warn."""

SURPRISE_HITS = 0.2
"""How far the server-reported cached share may exceed what the workload makes possible (its shared
prefixes, plus what it resends by design: a session's history, a call graph's parent context, an
agent's loop, a fixed system prompt; ``resent_input_tokens``) before the summary warns of a cache it
cannot explain (an earlier run with the same prompts)."""


def possible_hit_share(prefix_share: float | None, resent_share: float | None) -> float | None:
    """The cached share of prompt tokens a workload makes possible: its shared prefixes' share plus
    what it resends by design, at most 1; None when neither is known (a dataset's prompts, which
    may repeat: no warning)."""
    if prefix_share is None and not resent_share:
        return None
    return min(1.0, (prefix_share or 0.0) + (resent_share or 0.0))


def unexplained_hits(cached_share: float, possible: float | None) -> bool:
    """The server answered more of the prompts from its cache than the workload can explain."""
    return possible is not None and cached_share > possible + SURPRISE_HITS


TASK_SYNONYMS = ("session",)
"""SLO stems that mean task time: a call-graph session is a task (``session_p95_s`` = ``task_p95_s``)."""


@dataclass(frozen=True)
class Rate:
    """A throughput declared once: a PREFIX_requests.csv column summed per second of a window, each
    ok request spread over its lifetime (as the report's rps and token rates are)."""

    name: str
    """Its key in a report.json step entry (``inputs_per_s``)."""
    label: str
    """What a reader sees (``inputs/s``)."""
    description: str
    row_column: str
    """The requests column it sums (``inputs``)."""
    when: str = "inputs"
    """The column whose values make a section report it (``inputs``: embeddings; ``audio_seconds``: transcription)."""


RTFX = Rate("rtfx", "RTFx", "audio transcription: the seconds of audio of ok requests transcribed per wall-clock "
            "second (the real-time factor of the whole load; each request's audio spread over its lifetime)",
            "audio_seconds", when="audio_seconds")
"""The run's real-time factor: a step entry's ``rtfx``, the capacity's, and the divisor of an audio hour's price."""

RATES: tuple[Rate, ...] = (
    Rate("inputs_per_s", "inputs/s", "embeddings: the inputs of ok requests per second (their batches' sizes)",
         "inputs"),
    Rate("input_tps", "input tok/s", "embeddings: the input tokens of ok requests per second (usage.prompt_tokens)",
         "prompt_tokens"),
    RTFX,
)
"""The whole-body and upload endpoints' throughputs (a section whose rows carry a rate's ``when`` column:
``inputs`` for embeddings, ``audio_seconds`` for transcription), in display order."""
RATES_WHEN = "inputs"
"""The column whose values make a section report the embeddings' :data:`RATES` (each rate's ``when``)."""

REQUEST_RTFX = Rate("request_rtfx", "RTFx per request", "audio transcription: one request's audio seconds / its "
                    "E2E seconds, over ok requests (a report.json step entry has its percentiles)", "audio_seconds",
                    when="audio_seconds")
"""The per-request real-time factor: audio_seconds / (e2e_ms / 1000), computed by the report, not a column."""
AUDIO_HOUR_PRICE = "usd_per_audio_hour"
"""The cost key of an hour of audio at capacity: the replica's $/hour / RTFx at capacity."""


@dataclass(frozen=True)
class ClassMeasure:
    """A number the report gives each priority class (``priority:``), declared once: its report.json key."""

    name: str
    """Its key in report.json's ``priority_classes`` / ``isolation`` entries (``shed_rate``)."""
    label: str
    """What a reader sees (``shed rate``)."""
    description: str


SLO_ATTAINMENT = ClassMeasure(
    "attainment", "SLO attainment", "the share of the class's requests (cancelled left out) that were ok and within "
    "the SLO's limit; a failed or shed request never attains")
SHED_RATE = ClassMeasure(
    "shed_rate", "shed rate", "the share of the class's requests (cancelled left out) the server turned away with "
    "HTTP 429 or 503")
LEAKAGE = ClassMeasure(
    "leakage", "leakage", "how far a class's p95 moved when every class ran together, against the class alone: "
    "together - alone in ms, and that as % of alone")
CLASS_MEASURES: tuple[ClassMeasure, ...] = (SLO_ATTAINMENT, SHED_RATE, LEAKAGE)
SHED_HTTP_STATUSES: tuple[int, ...] = (429, 503)
"""The answers that count as shed (turned away) in a class's shed rate."""
ISOLATION_METRICS: tuple[Metric, ...] = (BY_NAME["ttft"], BY_NAME["tpot"])
"""The metrics an --isolation run compares alone vs together (the leakage), at :data:`ISOLATION_STAT`."""
ISOLATION_STAT = "p95"

RENAMED: dict[str, str] = {
    "worst_stall_ms": BY_NAME["itl_max"].key("max"),  # live rows, PREFIX_llm_history.csv, live/history.json
}
"""Keys of earlier releases → the catalog's spelling. For one release a live row (and so
PREFIX_llm_history.csv, live.json and history.json) carries the old key too, with the same value:
:func:`with_old_keys`; the history CSV puts the old columns last."""


def with_old_keys(row: dict[str, object]) -> dict[str, object]:
    """``row`` plus every :data:`RENAMED` old key whose new key it has (deprecated: next release drops them)."""
    for old, new in RENAMED.items():
        if new in row:
            row[old] = row[new]
    return row


def live_keys() -> tuple[str, ...]:
    """Every latency key of a live row (and of PREFIX_llm_history.csv), in display order."""
    return tuple(m.key(s) for m in METRICS for s in m.live)


def dashboard_spec() -> list[dict[str, object]]:
    """What the dashboard page fetches (``llmload/metrics.json``): one chart per metric, its series the live keys
    (``differs_from``: per series, the key of the metric it must differ from to be shown; "" for none)."""
    return [{"name": m.name, "title": f"{m.label} ({m.unit})", "description": m.description,
             "series": [{"name": s, "key": m.key(s)} for s in m.live if s != "mean"],
             "differs_from": m.differs_from and {s: BY_NAME[m.differs_from].key(s) for s in m.live if s != "mean"}}
            for m in METRICS if m.dashboard and m.live]


def slo_help() -> str:
    """The metric part of ``--slo``'s help and error messages."""
    names = ",".join(SLO_NAMES)
    return (f"error_rate, {{{names}}}_{{pNN,mean,median}}_ms or {TASK.name}_{{pNN,mean,median}}_{TASK.unit}, "
            "e.g. tpot_p99_ms")
