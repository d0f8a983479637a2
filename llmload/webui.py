"""The LLM tab in Locust's web UI, the live dashboard page, and CSV downloads.

Locust's React UI shows extra tabs from ``template_args`` (``extended_tabs``/``extended_tables``)
and their rows from ``extended_stats`` in the ``/stats/requests`` JSON it polls; extra links on its
Download Data tab come from ``extended_csv_files``. The plugin's own pages live in a blueprint
under Locust's ``--web-base-path`` and behind ``--web-login`` like Locust's own.

Routes (under the base path): ``llmload/dashboard`` (charts over time, SVG drawn by a small
script in the page: no CDN, works offline), ``llmload/live.json`` (the tab's rows),
``llmload/history.json`` (the dashboard's data), ``llmload/requests.csv``,
``llmload/llm_stats.csv``, ``llmload/history.csv``.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, request, send_file

if TYPE_CHECKING:
    from llmload.plugin import LLMLoadPlugin

TAB_KEY = "llm"
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")

TABLE = [
    ("scenario", "Scenario"), ("in_flight", "In flight"), ("rps", "Req/s"), ("output_tps", "Output tok/s"),
    ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p95_ms", "TTFT p95"), ("ttft_p99_ms", "TTFT p99"),
    ("tpot_p50_ms", "TPOT p50 ms"), ("tpot_p95_ms", "TPOT p95"), ("itl_p99_ms", "ITL p99 ms"),
    ("worst_stall_ms", "Worst stall ms"), ("cache_hit_ratio", "Cache hit ratio"), ("errors", "Errors"),
    ("errors_text", "Errors by status"), ("client", "Client"),
]


def _fmt(v: Any) -> Any:
    return "–" if v is None else v


def tab_rows(plugin: LLMLoadPlugin) -> list[dict[str, Any]]:
    """The LLM tab: the latest history sample (live window), one row per scenario."""
    latest = plugin.history.latest()
    if not latest:
        return []
    _, health = plugin.client_state()
    limited = [h for h in health if h.get("limited")]
    if limited:
        from llmload.health import describe

        client = "CLIENT-LIMITED: " + "; ".join(f"worker {h['worker']}: {describe(h)}" for h in limited)
    elif health:
        client = f"ok (CPU max {max(h['cpu'] for h in health):.0f} %)"
    else:
        client = "–"
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
        row["errors_text"] = ", ".join(f"{k} {v}" for k, v in sorted(r.get("errors_by_status", {}).items())) or "none"
        row["client"] = client
        out.append(row)
    return out


def install(environment: Any, plugin: LLMLoadPlugin) -> None:
    web_ui = environment.web_ui
    opts = environment.parsed_options
    base = (getattr(opts, "web_base_path", None) or "").rstrip("/")
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in TABLE]}]
    web_ui.template_args["extended_csv_files"] = [
        {"href": f"{base}/llmload/dashboard", "title": "LLM live dashboard (charts)"},
        {"href": f"{base}/llmload/requests.csv", "title": "Download llmload per-request CSV"},
        {"href": f"{base}/llmload/llm_stats.csv", "title": "Download llmload LLM stats CSV"},
        {"href": f"{base}/llmload/history.csv", "title": "Download llmload LLM history CSV"},
    ]
    auth = web_ui.auth_required_if_enabled
    bp = Blueprint("llmload", __name__, url_prefix=f"{base}/llmload" if base else "/llmload")

    @web_ui.app.after_request
    def add_llm_rows(response: Response) -> Response:
        if not request.path.endswith("/stats/requests") or response.status_code != 200 or not response.is_json:
            return response
        data = response.get_json()
        data["extended_stats"] = [{"key": TAB_KEY, "data": tab_rows(plugin)}]
        response.set_data(json.dumps(data))
        return response

    @bp.route("/dashboard")
    @auth
    def dashboard() -> Response:
        return send_file(os.path.join(STATIC, "dashboard.html"), mimetype="text/html", max_age=0)

    @bp.route("/live.json")
    @auth
    def live() -> Response:
        return Response(json.dumps({"rows": tab_rows(plugin), "time": time.time()}), mimetype="application/json")

    @bp.route("/history.json")
    @auth
    def history() -> Response:
        since = float(request.args.get("since", 0) or 0)
        rows = plugin.history.rows_since(since)
        return Response(json.dumps({"rows": rows, "state": environment.runner.state if environment.runner else ""}),
                        mimetype="application/json")

    def csv_file(suffix: str) -> Response:
        prefix = plugin.option("csv_prefix")
        path = f"{prefix}{suffix}" if prefix else None
        if path is None or not os.path.exists(path):
            return Response(f"no {suffix.lstrip('_')} yet: start Locust with --csv PREFIX to write it\n",
                            status=404, mimetype="text/plain")
        return send_file(os.path.abspath(path), mimetype="text/csv", as_attachment=True,
                         download_name=os.path.basename(path), max_age=0)

    @bp.route("/requests.csv")
    @auth
    def requests_csv() -> Response:
        return csv_file("_requests.csv")

    @bp.route("/llm_stats.csv")
    @auth
    def stats_csv() -> Response:
        return csv_file("_llm_stats.csv")

    @bp.route("/history.csv")
    @auth
    def history_csv() -> Response:
        return csv_file("_llm_history.csv")

    web_ui.app.register_blueprint(bp)
