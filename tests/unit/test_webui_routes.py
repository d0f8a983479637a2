"""The web UI's routes hold up against odd data and say no more than they must (issue 19, row 19)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from flask import Flask, jsonify

from llmload.metrics import catalog
from llmload.plugin.web.webui import install


class View:
    run_finished = False

    def __init__(self, broken: bool = False, models: bool = False, latest: list | None = None) -> None:
        self.broken, self.models, self.latest = broken, models, latest or []

    def runner_state(self) -> str:
        return "running"

    def stats_rows(self):
        return [{"scenario": "tenants", "requests": 10}] if self.models else []

    def model_stats_rows(self):
        return [{"scenario": "tenants", "requests": 7, "model": "adapter-a"}] if self.models else []

    def latest_rows(self):
        if self.broken:
            raise TypeError("a worker's health report with a string where a number belongs")
        return self.latest

    def history_rows(self, since=float("-inf")):
        return []

    def has_tasks(self):
        return False

    def client_health(self):
        return []

    def client_verdict(self):
        return {"text": "client: not limited (CPU and event-loop lag stayed under the thresholds)",
                "limited_intervals": 0, "intervals": 3}

    def server_samples(self):
        return []

    def server_urls(self):
        return ["http://user:pw@metrics.internal:9400/metrics?token=abc"]

    def run_file(self, suffix):
        return f"/srv/secret/place/run{suffix}"

    def watch_rows(self, listener):
        self.listener = listener

    def model(self):
        return "m"

    def load_state(self):
        return {"users": 0, "in_flight": {}, "health": []}


def app_with(view: View) -> Flask:
    app = Flask("t")

    @app.route("/stats/requests")
    def stats():
        return jsonify({"stats": []})

    web_ui = SimpleNamespace(app=app, template_args={}, auth_required_if_enabled=lambda f: f)
    install(SimpleNamespace(web_ui=web_ui, parsed_options=SimpleNamespace(web_base_path="", csv_prefix="run")), view)
    return app


def test_a_broken_row_leaves_locusts_own_endpoint_working(caplog):
    client = app_with(View(broken=True)).test_client()
    res = client.get("/stats/requests")
    assert res.status_code == 200 and res.get_json()["stats"] == []
    assert "the LLM tab could not be built this time: TypeError" in caplog.text


def test_no_local_path_and_no_url_secret_reaches_the_page():
    client = app_with(View()).test_client()
    res = client.get("/llmload/requests.csv")
    assert res.status_code == 404 and b"/srv/secret" not in res.data and b"run_requests.csv" in res.data
    history = json.loads(client.get("/llmload/history.json").data)
    assert history["server_metrics"] == ["http://user:***@metrics.internal:9400/metrics?token=***"]


def test_llmload_metrics_is_behind_the_web_uis_auth_and_counts_the_rows():
    import functools

    from flask import Response as FlaskResponse

    from llmload.metrics.record import CSV_COLUMNS

    def deny(f):
        @functools.wraps(f)
        def wrapped(*a, **kw):
            return FlaskResponse("login first", status=401)
        return wrapped

    app = Flask("t")
    web_ui = SimpleNamespace(app=app, template_args={}, auth_required_if_enabled=deny)
    install(SimpleNamespace(web_ui=web_ui, parsed_options=SimpleNamespace(web_base_path="", csv_prefix="")), View())
    assert app.test_client().get("/llmload/metrics").status_code == 401
    view = View()
    client = app_with(view).test_client()
    row = {c: None for c in CSV_COLUMNS} | {"scenario": "chat", "status": "ok", "e2e_ms": 900.0}
    view.listener([tuple(row[c] for c in CSV_COLUMNS)] * 3)
    res = client.get("/llmload/metrics")
    assert res.status_code == 200 and res.mimetype == "text/plain"
    assert b'gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_request_model="m",scenario="chat"} ' \
           b'3.0' in res.data


def test_two_llm_tabs_and_the_dashboards_files_from_the_package():
    from llmload.plugin.web import llm_tab

    app = Flask("t")
    web_ui = SimpleNamespace(app=app, template_args={}, auth_required_if_enabled=lambda f: f)
    install(SimpleNamespace(web_ui=web_ui, parsed_options=SimpleNamespace(web_base_path="", csv_prefix=None)), View())
    tabs, tables = web_ui.template_args["extended_tabs"], web_ui.template_args["extended_tables"]
    assert [t["title"] for t in tabs] == ["LLM", "LLM details"]
    assert [t["key"] for t in tables] == [t["key"] for t in tabs]
    assert [c["title"] for c in tables[0]["structure"]] == [t for _, t in llm_tab.DEFAULT]
    client = app.test_client()
    res = client.get("/llmload/static/vendor/uPlot.iife.min.js")
    assert res.status_code == 200 and b"uPlot" in res.data
    assert client.get("/llmload/static/dashboard.js").status_code == 200
    page = client.get("/llmload/dashboard").data.decode()
    # no CDN: the page loads the package's own files, by relative URLs (--web-base-path)
    assert "//" not in "".join(re.findall(r'(?:src|href)="([^"]*)"', page))
    assert 'src="static/vendor/uPlot.iife.min.js"' in page and 'href="static/vendor/uPlot.min.css"' in page
    assert client.get("/llmload/static/../webui.py").status_code == 404  # nothing outside static/


def test_every_static_file_is_package_data():
    """A wheel carries the dashboard's files: each one matches a package-data pattern of pyproject.toml."""
    import fnmatch
    import os
    import tomllib

    from llmload.plugin.web.webui import STATIC
    from tests.support.processes import ROOT

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        patterns = tomllib.load(f)["tool"]["setuptools"]["package-data"]["llmload.plugin.web"]
    plugin = os.path.dirname(STATIC)
    found = [os.path.relpath(os.path.join(d, n), plugin) for d, _, names in os.walk(STATIC) for n in names]
    assert {"static/dashboard.html", "static/dashboard.js", "static/vendor/uPlot.iife.min.js",
            "static/vendor/uPlot.min.css", "static/vendor/uPlot.LICENSE", "static/vendor/VERSION"} <= set(found)
    missing = [p for p in found if not any(fnmatch.fnmatch(p, pat) and p.count("/") == pat.count("/")
                                           for pat in patterns)]
    assert not missing, f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_without_csv_the_stats_download_has_the_per_model_rows_too():
    view = View(models=True)
    view.run_file = lambda suffix: None  # no --csv: the download comes from memory
    res = app_with(view).test_client().get("/llmload/llm_stats.csv")
    assert res.status_code == 200
    assert res.data.decode().splitlines() == ["scenario,requests,model", "tenants,10,", "tenants,7,adapter-a"]


def test_the_llm_rows_in_locusts_json_carry_numbers():
    """/stats/requests → extended_stats → llm: a dashboard or script reading Locust's JSON gets numbers
    (issue 32, item 18: they had become text, "43.6", "2.00"); Locust's page prints them."""
    ttft = catalog.BY_NAME["ttft"]
    latest = [{"scenario": "chat", "window_s": 10.0, "in_flight": 3, "rps": 2.0, "output_tps": 255.123, "errors": 0,
               "ok": 20, "errors_by_status": {}, "cache_hit_ratio": None, ttft.key("p50"): 43.6123,
               ttft.key("p95"): None}]
    data = app_with(View(latest=latest)).test_client().get("/stats/requests").get_json()
    llm = next(t for t in data["extended_stats"] if t["key"] == "llm")["data"][0]
    assert llm[ttft.key("p50")] == 43.6 and llm["rps"] == 2.0 and llm["output_tps"] == 255.0
    assert isinstance(llm["rps"], float) and llm["in_flight"] == 3 and llm[ttft.key("p95")] is None
    assert llm["window"] == "last 10 s"  # text where a cell is text
