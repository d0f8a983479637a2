"""The LLM tabs of Locust's web UI: which columns, and the rows they show. Pure (reads the run
through :class:`LiveView`; the web UI's routes are in :mod:`llmload.plugin.web.webui`).

Two tabs share one set of rows: **LLM** (:data:`DEFAULT`, at most 10 columns, fits 1,280 px) and
**LLM details** (:data:`DETAILS`: the other percentiles, errors by status, the client's health and
the server's own metrics). Every header reads ``Name (unit)`` (``TTFT p50 (ms)``, ``Output (tok/s)``);
every measured number has 3 significant digits and stays a number in the JSON (:func:`number`;
Locust's page prints it); counts stay whole; a cell of two numbers is text (``3 / 0``, :func:`three_digits`).

Usage::

    rows = tab_rows(view)                       # one dict per scenario (+ SERVER ERRORS first)
    [title for _key, title in DEFAULT]          # "Scenario", "Window", ..., "TTFT p50 (ms)", ...
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from llmload.metrics import catalog
from llmload.metrics.histogram import figure, significant
from llmload.metrics.record import OK, STATUSES
from llmload.metrics.stats import AGGREGATED


class LiveView(Protocol):
    """What the web UI reads of a run."""

    @property
    def run_finished(self) -> bool:
        """No test is running here (none started yet, or the last one has ended)."""
        ...

    def runner_state(self) -> str:
        """Locust's runner state ('' without a runner)."""
        ...

    def stats_rows(self) -> list[dict[str, Any]]:
        """The whole run per scenario (PREFIX_llm_stats.csv rows)."""
        ...

    def model_stats_rows(self) -> list[dict[str, Any]]:
        """models: mixes: the whole run per scenario and model (PREFIX_llm_stats.csv's model rows)."""
        ...

    def latest_rows(self) -> list[dict[str, Any]]:
        """The newest live sample, one row per scenario (PREFIX_llm_history.csv rows)."""
        ...

    def history_rows(self, since: float = float("-inf")) -> list[dict[str, Any]]:
        """The live samples taken after ``since`` (Unix seconds)."""
        ...

    def client_health(self) -> list[dict[str, Any]]:
        """The newest health sample of every load-generating process."""
        ...

    def client_verdict(self) -> dict[str, Any]:
        """The client's verdict over the run so far (``text``: the end-of-run summary's line)."""
        ...

    def server_samples(self) -> list[dict[str, Any]]:
        """The server's /metrics samples, oldest first ([] when not read)."""
        ...

    def has_tasks(self) -> bool:
        """Some scenario has finished an agent task or a call-graph session (its stats_rows have tasks)."""
        ...

    def server_urls(self) -> list[str]:
        ...

    def run_file(self, suffix: str) -> str | None:
        """The path of the run's file of ``suffix`` (a :mod:`llmload.files` name); None without --csv."""
        ...

    def watch_rows(self, listener: Any) -> None:
        """Call ``listener(rows)`` with every batch of final request rows."""
        ...

    def model(self) -> str:
        """The model the run asks for ('' until known)."""
        ...

    def load_state(self) -> dict[str, Any]:
        """``users``, ``in_flight`` (per scenario) and ``health`` (the client health samples) now."""
        ...


_LATENCY_TAB = [(m, st) for m in catalog.METRICS for st in m.tab]  # (metric, statistic) per latency column
_LATENCY_COLUMNS = {(m.name, st): (m.key(st), m.title(st, unit=True)) for m, st in _LATENCY_TAB}
DEFAULT = [
    ("scenario", "Scenario"), ("window", "Window"), ("in_flight", "In flight"), ("rps", "Rate (req/s)"),
    ("output_tps", "Output (tok/s)"),
    *(_LATENCY_COLUMNS[(m.name, st)] for m, st in _LATENCY_TAB if st in m.tab_default),
    ("errors", "Errors"),
]
"""The first LLM tab's columns: (row key, header)."""
DETAILS = [
    ("scenario", "Scenario"),
    *(_LATENCY_COLUMNS[(m.name, st)] for m, st in _LATENCY_TAB if st not in m.tab_default),
    ("cache_hit_ratio", "Prefix-cache hits (%)"), ("tasks", "Task or session p50 / p95 (s)"),
    ("errors_text", "Errors by status"), ("client", "Client"),
    ("server_queue", "Server running / waiting"), ("server_kv", "Server KV cache (%)"),
    ("server_hit", "Server prefix-cache hits (%)"), ("server_ttft", "TTFT mean server / client (ms)"),
]
"""The "LLM details" tab's columns. Shares are percentages everywhere (``cache_hit_ratio`` and the server's hit
rate are ratios in the rows: :func:`tab_rows` shows them × 100)."""
TABLE = list(dict([*DEFAULT, *DETAILS]).items())
"""Every column of a tab row (live.json's keys), each once."""
SERVER_KEYS = ("server_queue", "server_kv", "server_hit", "server_ttft")
_PAIRS = ("server_queue", "server_ttft")  # cells of two numbers: text ("3 / 0"); every other number stays a number
_TEXT = frozenset({"scenario", "window", "tasks", "errors_text", "client", *_PAIRS})  # the cells that are text
_TTFT_MEAN = catalog.BY_NAME["ttft"].key("mean")  # the client's, and the server's samples spell it the same
# whole-run summary (PREFIX_llm_stats.csv names) → the tab's columns, once a test has stopped
STOPPED = {"rps": "rps", "output_tps": "output_tps", **{m.key(st): m.stats_column(st) for m, st in _LATENCY_TAB},
           "cache_hit_ratio": "cache_hit_ratio", "errors": "failures"}
NO_VALUE = "–"


def three_digits(v: Any) -> Any:
    """A measured number as text with 3 significant digits, never in e-notation (0.9805 → "0.981", 57.23
    → "57.2", 12345.6 → "12300"); a count (int) as it is; None as "–"; anything else untouched. For the
    cells that hold text (pairs such as ``running / waiting``); a cell of one number is :func:`number`."""
    if v is None:
        return NO_VALUE
    if isinstance(v, bool) or not isinstance(v, float):
        return v
    return figure(v) if math.isfinite(v) else str(v)


def number(v: Any) -> Any:
    """A cell of one measured number, kept a number in the JSON (Locust's page prints it; scripts read
    it): 3 significant digits, what the histograms' 1 % supports (43.61 → 43.6); counts stay whole;
    None (and NaN) as null."""
    if isinstance(v, bool) or not isinstance(v, float):
        return v
    return significant(v)


def _pair(a: Any, b: Any) -> str:
    return f"{three_digits(a)} / {three_digits(b)}"


def server_cells(sample: dict[str, Any] | None, client_ttft_mean: Any) -> dict[str, str]:
    """The server columns of the whole-run row from the newest server sample. TTFT is compared on
    the means: the server's percentiles are interpolated inside coarse histogram buckets."""
    if not sample:
        return {k: NO_VALUE if k in _PAIRS else None for k in SERVER_KEYS}
    up = "" if sample.get("endpoints_up", 1) == sample.get("endpoints", 1) else \
        f" ({sample['endpoints_up']}/{sample['endpoints']} endpoints up)"
    whole = {k: round(v) if isinstance(v := sample.get(k), float) else v for k in ("running", "waiting")}
    return {
        "server_queue": f"{_pair(whole['running'], whole['waiting'])}{up}",
        "server_kv": number(_float(sample.get("kv_usage_pct"))),
        "server_hit": number(_percent(sample.get("prefix_hit_rate"))),
        "server_ttft": _pair(_float(sample.get(_TTFT_MEAN)), _float(client_ttft_mean)),
    }


def _float(v: Any) -> Any:
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _percent(ratio: Any) -> Any:
    return ratio * 100.0 if isinstance(ratio, int | float) and not isinstance(ratio, bool) else ratio


def task_cell(stats_row: dict[str, Any] | None) -> str:
    """An agent task's or a call-graph session's time, p50 / p95 over the run so far (whole tasks:
    a live window would cut most of them in two); "–" for a scenario without tasks."""
    if not stats_row or not stats_row.get("tasks"):
        return NO_VALUE
    return _pair(_float(stats_row.get("median_task_s")), _float(stats_row.get("p95_task_s")))


def stopped_rows(view: LiveView) -> list[dict[str, Any]]:
    """After a test: the whole run per scenario, marked stopped (not the last live window)."""
    out = []
    for r in [*view.stats_rows(), *_model_rows(view)]:
        row = {k: number(r.get(src)) for k, src in STOPPED.items()}
        row["cache_hit_ratio"] = number(_percent(r.get(STOPPED["cache_hit_ratio"])))
        row["tasks"] = task_cell(r)
        errors = {st: r.get(st, 0) for st in STATUSES if st not in (OK, "cancelled") and r.get(st)}
        row.update({"scenario": _label(r), "window": f"whole run ({r.get('duration_s') or 0:.0f} s), stopped",
                    "in_flight": "stopped", "errors_text": ", ".join(f"{k} {v}" for k, v in errors.items()) or "none",
                    "client": "run stopped", **server_cells(None, None)})
        out.append(row)
    return out


def _model_rows(view: LiveView) -> list[dict[str, Any]]:
    """models: mixes: the rows per (scenario, model) (a view without them: none)."""
    rows_of = getattr(view, "model_rows", None)
    return rows_of() if rows_of is not None else []


def _label(r: dict[str, Any]) -> str:
    """The Scenario cell: the scenario, and the model of a per-model row (``chat · adapter-a``)."""
    return f"{r['scenario']} · {r['model']}" if r.get("model") else r["scenario"]


def _client_text(health: list[dict[str, Any]]) -> str:
    limited = [h for h in health if h.get("limited")]
    if limited:
        from llmload.health.verdict import describe

        return "CLIENT-LIMITED: " + "; ".join(f"worker {h['worker']}: {describe(h)}" for h in limited)
    return f"ok (CPU max {max(h['cpu'] for h in health):.0f} %)" if health else NO_VALUE


def tab_rows(view: LiveView) -> list[dict[str, Any]]:
    """The LLM tabs: the latest history sample (live window), one row per scenario; the whole run,
    marked stopped, once the test is over."""
    if view.run_finished and view.runner_state() in ("stopped", "ready", ""):
        return stopped_rows(view)
    latest = view.latest_rows()
    if not latest:
        return []
    client = _client_text(view.client_health())
    samples = view.server_samples()
    sample = samples[-1] if samples else None
    out = []
    tasks = {r["scenario"]: r for r in view.stats_rows()} if view.has_tasks() else {}
    total = latest[-1]  # Aggregated, or the only scenario
    if total.get("errors_dominate"):  # first, and the client is not blamed for it
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(total.get("errors_by_status", {}).items()))
        failed = total["errors"] / max(1, total["ok"] + total["errors"]) * 100
        out.append({**{k: "" if k in _TEXT else None for k, _ in TABLE}, "scenario": "SERVER ERRORS",
                    "window": f"{failed:.0f} % failed",
                    "errors": total["errors"],
                    "errors_text": f"{failed:.0f} % of requests failed ({by_status}): the server, or the way to it",
                    "client": "not judged"})
        client = "not judged (errors dominate)"
    for r in [*latest, *_model_rows(view)]:
        row = {k: number(r.get(k)) for k, _ in TABLE}
        row["cache_hit_ratio"] = number(_percent(r.get("cache_hit_ratio")))
        row["window"] = f"last {r.get('window_s') or 0:.0f} s"
        row["tasks"] = task_cell(tasks.get(r["scenario"]) if not r.get("model") else None)  # tasks: per scenario
        row["errors_text"] = ", ".join(f"{k} {v}" for k, v in sorted(r.get("errors_by_status", {}).items())) or "none"
        row["client"] = client
        whole = not r.get("model") and (r["scenario"] == AGGREGATED or len(latest) == 1)
        row.update(server_cells(sample, r.get(_TTFT_MEAN)) if whole else
                   {k: "" if k in _TEXT else None for k in SERVER_KEYS})
        if r.get("model"):  # a model's row: in flight is counted per scenario only
            row.update({"scenario": _label(r), "in_flight": None})
        out.append(row)
    return out
