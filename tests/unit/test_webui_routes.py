"""The web UI's routes hold up against odd data and say no more than they must (issue 19, row 19)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from flask import Flask, jsonify

from llmload.plugin.webui import install


class View:
    run_finished = False

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    def runner_state(self) -> str:
        return "running"

    def stats_rows(self):
        return []

    def latest_rows(self):
        if self.broken:
            raise TypeError("a worker's health report with a string where a number belongs")
        return []

    def history_rows(self, since=float("-inf")):
        return []

    def client_health(self):
        return []

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
