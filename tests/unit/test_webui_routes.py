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
