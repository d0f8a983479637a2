"""The web UI's routes: the LLM tabs in Locust's page, the live dashboard page, and CSV downloads.

Locust's React UI shows extra tabs from ``template_args`` (``extended_tabs``/``extended_tables``)
and their rows from ``extended_stats`` in the ``/stats/requests`` JSON it polls; extra links on its
Download Data tab come from ``extended_csv_files``. The plugin's own pages live in a blueprint
under Locust's ``--web-base-path`` and behind ``--web-login`` like Locust's own.

Routes (under the base path): ``llmload/dashboard`` (charts over time, drawn by
``static/dashboard.js`` with uPlot, vendored under ``static/vendor/``: no CDN, works offline),
``llmload/static/...`` (those files), ``llmload/live.json`` (the tabs' rows),
``llmload/history.json`` (the dashboard's data: client rows, server samples, and the client's
verdict over the run so far, the end-of-run summary's line),
``llmload/metrics.json`` (the dashboard's latency charts: ``metrics.catalog.dashboard_spec``),
``llmload/metrics`` (llmload's own metrics in Prometheus' text format, :mod:`llmload.plugin.output.prometheus_export`),
``llmload/requests.csv`` and ``llmload/server_metrics.csv`` (written only with ``--csv``: without
it the links say so), ``llmload/llm_stats.csv`` and ``llmload/history.csv`` (the file with
``--csv``, else made from the rows in memory).

The tabs' columns and rows are :mod:`llmload.plugin.web.llm_tab`'s.

Everything here reads the run through :class:`LiveView` (the plugin's
:class:`~llmload.plugin.web.views.RunViews`), never the plugin.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from typing import Any

from flask import Blueprint, Response, request, send_file, send_from_directory

from llmload import files
from llmload.metrics import catalog
from llmload.plugin.output.run_files import HISTORY_COLUMNS
from llmload.plugin.web import llm_tab
from llmload.plugin.web.llm_tab import LiveView, tab_rows
from llmload.wire.redact import redact_url

log = logging.getLogger("llmload")


TABS = (("llm", "LLM", llm_tab.DEFAULT), ("llm_details", "LLM details", llm_tab.DETAILS))
"""Locust's extended tabs: (key, title, columns); every tab shows the same rows (:func:`llm_tab.tab_rows`)."""
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")


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
    web_ui.template_args["extended_tabs"] = [{"title": title, "key": key} for key, title, _ in TABS]
    web_ui.template_args["extended_tables"] = [
        {"key": key, "structure": [{"key": k, "title": t} for k, t in columns]} for key, _, columns in TABS]
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
    from llmload.plugin.output.prometheus_export import LLMLoadMetrics

    exported = LLMLoadMetrics(view.model, view.load_state)
    view.watch_rows(exported.add_rows)
    bp = Blueprint("llmload", __name__, url_prefix=f"{base}/llmload" if base else "/llmload")

    @web_ui.app.after_request
    def add_llm_rows(response: Response) -> Response:
        if not request.path.endswith("/stats/requests") or response.status_code != 200 or not response.is_json:
            return response
        try:
            data = response.get_json()
            rows = tab_rows(view)
            data["extended_stats"] = [{"key": key, "data": rows} for key, _, _ in TABS]
            response.set_data(json.dumps(data))
        except Exception as e:  # noqa: BLE001 - a bad row (a worker's odd report) must not take Locust's page down
            log.warning("llmload: the LLM tab could not be built this time: %s: %s", type(e).__name__, e)
        return response

    @bp.route("/dashboard")
    @auth
    def dashboard() -> Response:
        return send_file(os.path.join(STATIC, "dashboard.html"), mimetype="text/html", max_age=0)

    @bp.route("/static/<path:name>")
    @auth
    def static(name: str) -> Response:  # the dashboard's script and the vendored uPlot (no CDN)
        return send_from_directory(STATIC, name, max_age=0)

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
                                    "client": view.client_verdict(),
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
        return csv_file(files.LLM_STATS, lambda: rows_csv(all_rows := [*view.stats_rows(), *view.model_stats_rows()],
                                                          list(dict.fromkeys(k for r in all_rows for k in r))))

    @bp.route("/history.csv")
    @auth
    def history_csv() -> Response:
        return csv_file(files.HISTORY, lambda: rows_csv(view.history_rows(), HISTORY_COLUMNS))

    web_ui.app.register_blueprint(bp)
