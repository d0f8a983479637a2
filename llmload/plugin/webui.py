"""The LLM tab in Locust's web UI, the live dashboard page, and CSV downloads.

Locust's React UI shows extra tabs from ``template_args`` (``extended_tabs``/``extended_tables``)
and their rows from ``extended_stats`` in the ``/stats/requests`` JSON it polls; extra links on its
Download Data tab come from ``extended_csv_files``. The plugin's own pages live in a blueprint
under Locust's ``--web-base-path`` and behind ``--web-login`` like Locust's own.

Routes (under the base path): ``llmload/dashboard`` (charts over time, SVG drawn by a small
script in the page: no CDN, works offline), ``llmload/live.json`` (the tab's rows),
``llmload/history.json`` (the dashboard's data: client rows and server samples),
``llmload/metrics.json`` (the dashboard's latency charts: ``metrics.catalog.dashboard_spec``),
``llmload/metrics`` (llmload's own metrics in Prometheus' text format, :mod:`llmload.plugin.prometheus_export`),
``llmload/requests.csv`` and ``llmload/server_metrics.csv`` (written only with ``--csv``: without
it the links say so), ``llmload/llm_stats.csv`` and ``llmload/history.csv`` (the file with
``--csv``, else made from the rows in memory).

While a test runs the tab shows the live window (the last 10 s) and, on the whole-run row, the
server's own metrics when they are read (running/waiting, KV cache, prefix hit rate, server vs
client TTFT). Once it has stopped, the tab shows the whole run's figures and says "stopped".

Everything here reads the run through :class:`LiveView` (the plugin's
:class:`~llmload.plugin.views.RunViews`), never the plugin.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from typing import Any, Protocol

from flask import Blueprint, Response, request, send_file

from llmload import files
from llmload.metrics import catalog
from llmload.metrics.record import OK, STATUSES
from llmload.metrics.stats import AGGREGATED
from llmload.plugin.run_files import HISTORY_COLUMNS
from llmload.wire.redact import redact_url

log = logging.getLogger("llmload")


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

    def latest_rows(self) -> list[dict[str, Any]]:
        """The newest live sample, one row per scenario (PREFIX_llm_history.csv rows)."""
        ...

    def history_rows(self, since: float = float("-inf")) -> list[dict[str, Any]]:
        """The live samples taken after ``since`` (Unix seconds)."""
        ...

    def client_health(self) -> list[dict[str, Any]]:
        """The newest health sample of every load-generating process."""
        ...

    def server_samples(self) -> list[dict[str, Any]]:
        """The server's /metrics samples, oldest first ([] when not read)."""
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


TAB_KEY = "llm"
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")

_LATENCY_TAB = [(m, st) for m in catalog.METRICS for st in m.tab]  # (metric, statistic) per latency column
TABLE = [
    ("scenario", "Scenario"), ("window", "Window"), ("in_flight", "In flight"), ("rps", "Req/s"),
    ("output_tps", "Output tok/s"), *((m.key(st), m.title(st, unit=True)) for m, st in _LATENCY_TAB),
    ("cache_hit_ratio", "Cache hit ratio"),
    ("errors", "Errors"), ("errors_text", "Errors by status"), ("client", "Client"),
    ("server_queue", "Server running / waiting"), ("server_kv", "Server KV cache %"),
    ("server_hit", "Server prefix hit rate"), ("server_ttft", "TTFT mean server / client"),
]
SERVER_KEYS = ("server_queue", "server_kv", "server_hit", "server_ttft")
_TTFT_MEAN = catalog.BY_NAME["ttft"].key("mean")  # the client's, and the server's samples spell it the same
# whole-run summary (PREFIX_llm_stats.csv names) → the tab's columns, once a test has stopped
STOPPED = {"rps": "rps", "output_tps": "output_tps", **{m.key(st): m.stats_column(st) for m, st in _LATENCY_TAB},
           "cache_hit_ratio": "cache_hit_ratio", "errors": "failures"}


def _fmt(v: Any) -> Any:
    return "–" if v is None else v


def _num(v: Any, nd: int = 1) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def server_cells(sample: dict[str, Any] | None, client_ttft_mean: Any) -> dict[str, str]:
    """The server columns of the whole-run row from the newest server sample. TTFT is compared on
    the means: the server's percentiles are interpolated inside coarse histogram buckets."""
    if not sample:
        return {k: "–" for k in SERVER_KEYS}
    up = "" if sample.get("endpoints_up", 1) == sample.get("endpoints", 1) else \
        f" ({sample['endpoints_up']}/{sample['endpoints']} endpoints up)"
    return {
        "server_queue": f"{_num(sample.get('running'), 0)} / {_num(sample.get('waiting'), 0)}{up}",
        "server_kv": _num(sample.get("kv_usage_pct"), 1),
        "server_hit": _num(sample.get("prefix_hit_rate"), 3),
        "server_ttft": f"{_num(sample.get(_TTFT_MEAN), 1)} / {_num(client_ttft_mean, 1)}",
    }


def stopped_rows(view: LiveView) -> list[dict[str, Any]]:
    """After a test: the whole run per scenario, marked stopped (not the last live window)."""
    out = []
    for r in view.stats_rows():
        row = {k: _fmt(round(v, 2) if isinstance(v := r.get(src), float) else v) for k, src in STOPPED.items()}
        errors = {st: r.get(st, 0) for st in STATUSES if st not in (OK, "cancelled") and r.get(st)}
        row.update({"scenario": r["scenario"], "window": f"whole run ({r.get('duration_s') or 0:.0f} s), stopped",
                    "in_flight": "stopped", "errors_text": ", ".join(f"{k} {v}" for k, v in errors.items()) or "none",
                    "client": "run stopped", **{k: "–" for k in SERVER_KEYS}})
        out.append(row)
    return out


def tab_rows(view: LiveView) -> list[dict[str, Any]]:
    """The LLM tab: the latest history sample (live window), one row per scenario; the whole run,
    marked stopped, once the test is over."""
    if view.run_finished and view.runner_state() in ("stopped", "ready", ""):
        return stopped_rows(view)
    latest = view.latest_rows()
    if not latest:
        return []
    health = view.client_health()
    limited = [h for h in health if h.get("limited")]
    if limited:
        from llmload.health.verdict import describe

        client = "CLIENT-LIMITED: " + "; ".join(f"worker {h['worker']}: {describe(h)}" for h in limited)
    elif health:
        client = f"ok (CPU max {max(h['cpu'] for h in health):.0f} %)"
    else:
        client = "–"
    samples = view.server_samples()
    sample = samples[-1] if samples else None
    out = []
    total = latest[-1]  # Aggregated, or the only scenario
    if total.get("errors_dominate"):  # first, and the client is not blamed for it
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(total.get("errors_by_status", {}).items()))
        failed = total["errors"] / max(1, total["ok"] + total["errors"]) * 100
        out.append({**{k: "" for k, _ in TABLE}, "scenario": "SERVER ERRORS", "errors": total["errors"],
                    "errors_text": f"{failed:.0f} % of requests failed ({by_status}): the server, or the way to it",
                    "client": "not judged"})
        client = "not judged (errors dominate)"
    for r in latest:
        row = {k: _fmt(r.get(k)) for k, _ in TABLE}
        row["window"] = f"last {r.get('window_s') or 0:.0f} s"
        row["errors_text"] = ", ".join(f"{k} {v}" for k, v in sorted(r.get("errors_by_status", {}).items())) or "none"
        row["client"] = client
        whole = r["scenario"] == AGGREGATED or len(latest) == 1
        row.update(server_cells(sample, r.get(_TTFT_MEAN)) if whole else {k: "" for k in SERVER_KEYS})
        out.append(row)
    return out


def rows_csv(rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...] | None = None) -> str:
    """In-memory rows as CSV text (for the downloads of a run without --csv)."""
    buf = io.StringIO()
    cols = list(columns or (rows[0] if rows else []))
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        w.writerow([";".join(f"{k}:{v}" for k, v in sorted(r[c].items())) if isinstance(r.get(c), dict)
                    else r.get(c) for c in cols])
    return buf.getvalue()


def install(environment: Any, view: LiveView) -> None:
    web_ui = environment.web_ui
    opts = environment.parsed_options
    base = (getattr(opts, "web_base_path", None) or "").rstrip("/")
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in TABLE]}]
    recorded = bool(getattr(opts, "csv_prefix", None))
    needs_csv = "" if recorded else " (not recorded: start Locust with --csv PREFIX)"
    web_ui.template_args["extended_csv_files"] = [
        {"href": f"{base}/llmload/dashboard", "title": "LLM live dashboard (charts)"},
        {"href": f"{base}/llmload/requests.csv", "title": "Download llmload per-request CSV" + needs_csv},
        {"href": f"{base}/llmload/llm_stats.csv", "title": "Download llmload LLM stats CSV"},
        {"href": f"{base}/llmload/history.csv", "title": "Download llmload LLM history CSV"},
        {"href": f"{base}/llmload/server_metrics.csv", "title": "Download llmload server metrics CSV" + needs_csv},
    ]
    auth = web_ui.auth_required_if_enabled
    from llmload.plugin.prometheus_export import LLMLoadMetrics

    exported = LLMLoadMetrics(view.model, view.load_state)
    view.watch_rows(exported.add_rows)
    bp = Blueprint("llmload", __name__, url_prefix=f"{base}/llmload" if base else "/llmload")

    @web_ui.app.after_request
    def add_llm_rows(response: Response) -> Response:
        if not request.path.endswith("/stats/requests") or response.status_code != 200 or not response.is_json:
            return response
        try:
            data = response.get_json()
            data["extended_stats"] = [{"key": TAB_KEY, "data": tab_rows(view)}]
            response.set_data(json.dumps(data))
        except Exception as e:  # noqa: BLE001 - a bad row (a worker's odd report) must not take Locust's page down
            log.warning("llmload: the LLM tab could not be built this time: %s: %s", type(e).__name__, e)
        return response

    @bp.route("/dashboard")
    @auth
    def dashboard() -> Response:
        return send_file(os.path.join(STATIC, "dashboard.html"), mimetype="text/html", max_age=0)

    @bp.route("/metrics.json")
    @auth
    def metrics() -> Response:  # the dashboard's latency charts, from the metric catalog
        return Response(json.dumps({"metrics": catalog.dashboard_spec()}), mimetype="application/json")

    @bp.route("/metrics")
    @auth
    def prometheus_metrics() -> Response:  # for Prometheus and Grafana, behind the web UI's auth
        return Response(exported.exposition(), mimetype="text/plain; version=0.0.4; charset=utf-8")

    @bp.route("/live.json")
    @auth
    def live() -> Response:
        return Response(json.dumps({"rows": tab_rows(view), "time": time.time()}), mimetype="application/json")

    @bp.route("/history.json")
    @auth
    def history() -> Response:
        since = float(request.args.get("since", 0) or 0)
        server_since = float(request.args.get("server_since", 0) or 0)
        rows = view.history_rows(since)
        server = [s for s in view.server_samples() if s["time"] > server_since]
        return Response(json.dumps({"rows": rows, "server": server, "state": view.runner_state(),
                                    "server_metrics": [redact_url(u) for u in view.server_urls()]}),
                        mimetype="application/json")

    def csv_file(suffix: str, in_memory: Any = None) -> Response:
        path = view.run_file(suffix)
        name = f"llmload{suffix}"
        if path is not None and os.path.exists(path):
            return send_file(os.path.abspath(path), mimetype="text/csv", as_attachment=True,
                             download_name=os.path.basename(path), max_age=0)
        if in_memory is not None:  # no --csv: what this process holds
            return Response(in_memory(), mimetype="text/csv",
                            headers={"Content-Disposition": f"attachment; filename={name}"})
        # the file's name only: the page must not tell a visitor where on disk the run writes
        why = ("start Locust with --csv PREFIX to write it" if path is None
               else f"{os.path.basename(path)} is not written yet")
        return Response(f"no {suffix.lstrip('_')}: {why}\n", status=404, mimetype="text/plain")

    @bp.route("/requests.csv")
    @auth
    def requests_csv() -> Response:
        return csv_file(files.REQUESTS)

    @bp.route("/server_metrics.csv")
    @auth
    def server_metrics_csv() -> Response:
        return csv_file(files.SERVER_METRICS)

    @bp.route("/llm_stats.csv")
    @auth
    def stats_csv() -> Response:
        return csv_file(files.LLM_STATS, lambda: rows_csv(view.stats_rows()))

    @bp.route("/history.csv")
    @auth
    def history_csv() -> Response:
        return csv_file(files.HISTORY, lambda: rows_csv(view.history_rows(), HISTORY_COLUMNS))

    web_ui.app.register_blueprint(bp)
