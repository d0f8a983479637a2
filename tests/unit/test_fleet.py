"""Fleets, the pure parts: the plan's fleet keys and their errors, the cells they expand into, each
router's generated config, the affinity headers, the report's per-replica numbers and lost
members, the steps' req/s interval, and the fleet summary's η, interval, plan and verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from llmload.report.sections.replicas import ReplicaRun, flag_lost_members, lost_members, shares
from llmload.report.steps import Step, rate_ci
from llmload.sweep.cells import expand, variants
from llmload.sweep.fleet import litellm, nginx
from llmload.sweep.fleet.routers import install_problem, policy_problem
from llmload.sweep.fleet.summary import fleet_options, fleet_summary
from llmload.sweep.frontier import best_deployments
from llmload.sweep.plan import PlanError, parse_plan
from llmload.workload.affinity import PREFIX_HEADER, SESSION_HEADER, affinity_headers

BASE = """\
slo: [ttft_p95_ms=500]
target_rps: 100
deployments:
  mock:
    serve: "llmload mock --port {{port}} --seed {{replica}}"
{fleet}    gpus: 1
    gpu_hourly_usd: 2.0
workloads:
  chat: {{input_tokens: 10, output_tokens: 4}}
load: {{steps: [1, 2], step_seconds: 4, warmup_s: 1}}
"""


def _plan(fleet: str):
    return parse_plan(BASE.format(fleet=fleet), "plan.yaml")


def test_a_fleet_expands_into_one_replica_once_and_each_policy_at_each_k():
    plan = _plan("    replicas: [1, 2, 4]\n    policy: [round_robin, least_conn, affinity]\n")
    ids = [v.id for v in variants(plan)]
    assert ids == ["mock ×1", "mock ×2 round_robin", "mock ×2 least_conn", "mock ×2 affinity", "mock ×4 round_robin",
                   "mock ×4 least_conn", "mock ×4 affinity"]
    cells = expand(plan)
    assert cells[0].id == "mock-k1.chat.r1" and cells[1].id == "mock-k2-round_robin.chat.r1"
    v = variants(plan)[-1]
    assert v.gpus == 4 and v.command(8123, replica=3)[-3:] == ["8123", "--seed", "3"]


@pytest.mark.parametrize(("fleet", "where", "says"), [
    ("    replicas: [0, 2]\n", "plan.yaml:6: deployments.mock.replicas", "distinct replica counts from 1 to 64"),
    ("    replicas: 2\n    router: haproxy\n", "deployments.mock.router", "expected nginx or litellm"),
    ("    replicas: 2\n    router: litellm\n    policy: [round_robin]\n", "deployments.mock.policy[0]",
     "litellm has no round_robin; its policies: random (simple-shuffle), least_conn (least-busy)"),
    ("    replicas: 2\n    policy: fastest\n", "deployments.mock.policy", "nginx has no fastest"),
    ("    replicas: 2\n    router: litellm\n    affinity_key: prefix\n", "deployments.mock.affinity_key",
     "litellm pins sessions only"),
    ("    policy: least_conn\n", "deployments.mock.policy", "a fleet needs replicas:"),
])
def test_bad_fleet_keys_are_one_line_naming_the_key(fleet, where, says):
    with pytest.raises(PlanError) as e:
        _plan(fleet)
    assert where in str(e.value) and says in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_a_host_deployment_cannot_be_a_fleet():
    text = BASE.format(fleet="    replicas: [2]\n").replace('serve: "llmload mock --port {port} --seed {replica}"',
                                                            'host: "http://10.0.0.5:8000"')
    with pytest.raises(PlanError, match="a fleet is started from serve:"):
        parse_plan(text, "plan.yaml")


def test_nginx_config_per_policy_and_its_hash():
    ups = ["127.0.0.1:8001", "127.0.0.1:8002"]
    assert "hash $http_x_llmload_session_id;" in nginx.config_text(ups, 9000, "affinity", "session", "/r")
    assert "hash $http_x_llmload_prefix_id;" in nginx.config_text(ups, 9000, "affinity", "prefix", "/r")
    conf = nginx.config_text(ups, 9000, "least_conn", "session", "/r")
    assert "least_conn;" in conf and "listen 127.0.0.1:9000;" in conf and "proxy_buffering off;" in conf
    assert "server 127.0.0.1:8002 max_fails=0;" in conf and "pid /r/nginx.pid;" in conf
    assert conf.index("least_conn;") < conf.index("keepalive 64;")  # nginx wants the method first
    rr = nginx.config_text(ups, 9000, "round_robin", "session", "/r")
    assert "least_conn" not in rr and "hash " not in rr and "random;" not in rr
    assert nginx.upstream_of({"x-llmload-upstream": "127.0.0.1:8001, 127.0.0.1:8002"}) == "127.0.0.1:8002"
    # ngx_http_upstream_hash_module: ((crc32(key) >> 16) & 0x7fff) % K
    assert nginx.hash_replica("prefix-rag_doc0", 2) == ((0x0 + (__import__("zlib").crc32(b"prefix-rag_doc0") >> 16))
                                                       & 0x7FFF) % 2


def test_litellm_config_and_what_it_needs():
    text = litellm.config_text(["http://127.0.0.1:8001", "http://127.0.0.1:8002"], "tiny", "affinity")
    import json

    cfg = json.loads(text)
    assert [m["model_info"]["id"] for m in cfg["model_list"]] == ["replica-0", "replica-1"]
    assert cfg["model_list"][1]["litellm_params"] == {"model": "openai/tiny", "api_base": "http://127.0.0.1:8002/v1",
                                                       "api_key": "none", "timeout": 600, "stream_timeout": 600}
    assert cfg["router_settings"] == {"routing_strategy": "simple-shuffle", "num_retries": 0,
                                      "optional_pre_call_checks": ["session_affinity"]}
    assert json.loads(litellm.config_text(["http://h:1"], "m", "least_conn"))["router_settings"]["routing_strategy"] \
        == "least-busy"
    assert litellm.VERSION == "1.108.7" and "1.107.0" in litellm.COMPROMISED
    with pytest.raises(SystemExit, match="compromised"):
        litellm.install("1.107.0")
    assert litellm.upstream_index({"x-litellm-model-id": "replica-3"}) == 3


def test_router_not_installed_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(nginx, "binary", lambda: None)
    assert install_problem("nginx") == ("nginx is not installed: apt-get install -y nginx (Debian's package; llmload "
                                        "runs it itself, on 127.0.0.1)")
    monkeypatch.setenv("LLMLOAD_CACHE", str(tmp_path))
    assert f"python3 -m venv {tmp_path}/litellm/1.108.7 && " in install_problem("litellm")
    assert policy_problem("nginx", "least_conn") is None


def test_affinity_headers_say_the_session_else_the_prefix():
    assert affinity_headers("", "", None) is None
    assert affinity_headers("s1a-3", "rag.faq4", {"X": "1"}) == {
        SESSION_HEADER: "session-s1a-3", PREFIX_HEADER: "prefix-rag_faq4", "X": "1"}
    assert affinity_headers("", "rag.doc0", None) == {SESSION_HEADER: "prefix-rag_doc0",
                                                      PREFIX_HEADER: "prefix-rag_doc0"}


def test_lost_members_need_two_failed_scrapes_to_the_end():
    up = {"a": [(1.0, True), (2.0, True), (3.0, False), (4.0, False)], "b": [(1.0, True), (2.0, False), (3.0, True)],
          "c": [(1.0, True), (2.0, True), (3.0, True), (4.0, False)]}
    assert lost_members(up) == [{"endpoint": "a", "last_answered": 2.0, "down_since": 3.0}]
    run = ReplicaRun(["a", "b"], {}, up, lost_members(up))
    before, during = Step(2, 0.0, 1.9, 0.5, {"verdict": "met"}), Step(4, 1.9, 5.0, 2.2, {"verdict": "met"})
    flag_lost_members([before, during], run)
    assert "fleet_lost" not in before.data
    assert during.data["fleet_lost"] == ["a"] and during.data["verdict"] == "met; fleet lost a member"
    assert during.data["never_capacity"].startswith("the fleet lost a member: a (stopped answering at 3.0)")


def test_shares_and_imbalance_fall_back_to_output_tokens():
    per = {"a": {"requests": 30.0, "output_tokens": 300.0}, "b": {"requests": 10.0, "output_tokens": 100.0}}
    assert shares(per) == {"share_by": "requests", "imbalance": 1.5} and per["a"]["share"] == 0.75
    per = {"a": {"requests": None, "output_tokens": 300.0}, "b": {"requests": None, "output_tokens": 300.0}}
    assert shares(per) == {"share_by": "output_tokens", "imbalance": 1.0}


def test_rate_interval_holds_a_steady_rate():
    start = np.arange(0.0, 10.0, 0.1)  # a request every 100 ms, each 50 ms long: 10 req/s
    lo, hi = rate_ci(start, start + 0.05, 0.0, 10.0)
    assert lo <= 10.0 <= hi and hi - lo < 0.5
    assert rate_ci(np.array([]), np.array([]), 0.0, 10.0) == [None, None]


def _cell(k: int, policy: str | None, rps: float, ci: float = 0.02, workload: str = "rag", out_tps: float = 100.0):
    step = {"level": 2 * k, "users": 2 * k, "rps": rps, "rps_ci95": [rps * (1 - ci), rps * (1 + ci)], "thin": False,
            "replicas": {f"http://r{i}/metrics": {"share": 1 / k, "requests": 10.0, "waiting": {"mean": 0.0},
                                                  "kv_usage": {"mean": 0.1}} for i in range(k)},
            "imbalance": 1.0, "share_by": "requests", "prefix_cache_hit_rate": 0.5}
    return {"id": f"c{k}{policy}", "status": "done", "workload": workload, "base": "mock", "replicas": k,
            "policy": policy, "router": "nginx", "gpus_per_replica": 1, "gpu_hourly_usd": 2.0, "gpus": k,
            "deployment": f"mock ×{k} {policy}", "capacity": {"level": 2 * k, "rps": rps, "users": 2 * k,
                                                             "output_tps": out_tps * k},
            "steps": [step], "fleet": {"replicas": [{"metrics_url": f"http://r{i}/metrics", "index": i}
                                                   for i in range(k)]}}


def test_eta_its_interval_and_the_plan_from_measured_eta():
    cells = [_cell(1, None, 10.0), _cell(2, "round_robin", 19.0), _cell(4, "round_robin", 34.0),
             _cell(2, "affinity", 26.0), _cell(4, "affinity", 52.0)]
    f = fleet_summary(cells, target_rps=50.0, target_users=None, headroom=0.3)["rag"]["mock"]
    rr, aff = f["policies"]["round_robin"], f["policies"]["affinity"]
    assert rr["k"]["2"]["eta"] == 0.95 and rr["k"]["4"]["eta"] == 0.85
    assert rr["k"]["4"]["eta_interval"] == [round(34 * 0.98 / (4 * 10.2), 4), round(34 * 1.02 / (4 * 9.8), 4)]
    # per replica 34/4 = 8.5 req/s at ×4: ⌈50 / (8.5 × 0.7)⌉ = 9 replicas; η(4) is the nearest measured fleet
    assert rr["k"]["4"]["replicas"] == 9 and rr["plan"]["k_used"] == 4 and rr["plan"]["extrapolated"]
    # affinity holds 13 per replica: ⌈50 / 9.1⌉ = 6; K × one would say ⌈50 / 7⌉ = 8
    assert aff["plan"]["replicas"] == 6 and f["linear_plan"]["replicas"] == 8
    assert f["cheapest_policy"] == "affinity" and aff["plan"]["usd_per_month"] == 6 * 2.0 * 730
    assert any(v.startswith("×4: affinity has the highest η, 1.30") and "a real difference" in v for v in f["verdicts"])
    best = best_deployments(cells, 50.0, None, 0.3, fleet_options({"rag": {"mock": f}}))["rag"]
    assert best["deployment"] == "mock behind nginx (affinity)" and best["replicas"] == 6
    assert best["runner_up"]["deployment"] == "mock behind nginx (round_robin)"


def test_a_policy_answer_uses_the_largest_measured_fleet_not_bigger_than_it():
    cells = [_cell(1, None, 10.0), _cell(2, "least_conn", 20.0), _cell(8, "least_conn", 40.0)]
    f = fleet_summary(cells, target_rps=20.0, target_users=None, headroom=0.0)["rag"]["mock"]
    lc = f["policies"]["least_conn"]
    assert lc["k"]["2"]["replicas"] == 2 and lc["k"]["8"]["replicas"] == 4  # ×8 says 4: smaller than 8
    assert lc["plan"]["k_used"] == 2 and lc["plan"]["replicas"] == 2 and not lc["plan"]["extrapolated"]
