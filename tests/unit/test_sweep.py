"""The sweep's pure parts: the plan file and its errors, the cells, the Pareto frontier and the answer."""

from __future__ import annotations

import pytest

from llmload.sweep.cells import dry_run_text, expand, variants
from llmload.sweep.frontier import best_deployments, frontier_points, pareto_flags
from llmload.sweep.plan import PlanError, parse_plan

PLAN = """\
slo: [ttft_p95_ms=2000]
target_rps: 10
deployments:
  small: {serve: "mock --port {port} --max-num-seqs {max_num_seqs}", gpus: 1, gpu_hourly_usd: 2}
  big: {host: "http://127.0.0.1:8000", tp: 2, pp: 2, gpu_hourly_usd: 3}
params: {max_num_seqs: [4, 8]}
workloads:
  chat: {input_tokens: 100, output_tokens: 32}
  long: {input_tokens: 2000-4000, output_tokens: 64}
load: {steps: [2, 4], step_seconds: 10}
repeats: 2
"""


def test_a_plan_expands_into_deployments_params_workloads_and_repeats():
    plan = parse_plan(PLAN, "p.yaml")
    assert [d.gpus for d in plan.deployments] == [1, 4]
    assert [v.id for v in variants(plan)] == ["small[max_num_seqs=4]", "small[max_num_seqs=8]", "big"]
    cells = expand(plan)
    assert len(cells) == 3 * 2 * 2
    assert len({c.id for c in cells}) == len(cells)
    assert cells[0].id == "small-max_num_seqs=4.chat.r1" and cells[-1].id == "big.long.r2"
    assert cells[0].variant.command(8123) == ["mock", "--port", "8123", "--max-num-seqs", "4"]
    assert cells[1].workload.locust_args() == ["--input-tokens", "2000-4000", "--output-tokens", "64", "--ignore-eos"]
    text = dry_run_text(plan)
    assert "12 cells" in text and "estimated time" in text


@pytest.mark.parametrize("change, message", [
    (("gpu_hourly_usd: 2", "gpu_hourly_usdd: 2"), "p.yaml:4: deployments.small.gpu_hourly_usdd: unknown key; "
                                                  "did you mean gpu_hourly_usd?"),
    (("--port {port} ", ""), "p.yaml:4: deployments.small.serve: the command must contain {port}"),
    (("{max_num_seqs: [4, 8]}", "{max_seqs: [4, 8]}"), "params.max_seqs: no serve: template uses {max_seqs}"),
    (("steps: [2, 4]", "steps: [2, -4]"), "p.yaml:10: load.steps: expected a list of user counts"),
    (("output_tokens: 32", "output_tokens: many"), "p.yaml:8: workloads.chat.output_tokens: expected a token count"),
    (("repeats: 2", "repeats: 0"), "p.yaml:11: repeats: expected a whole number >= 1"),
    (("slo: [ttft_p95_ms=2000]", "slo: [ttft_p95=2000]"), "p.yaml:1: slo[0]:"),
    (("target_rps: 10", "target_rps: 10\ntarget_users: 5"), "target_users: give target_rps or target_users"),
    (("gpu_hourly_usd: 3}", "gpu_hourly_usd: 3, gpu_metrics: 9400}"),
     "p.yaml:5: deployments.big.gpu_metrics: expected the URL (or a list of URLs) of a DCGM exporter's metrics"),
    (("step_seconds: 10}", "step_seconds: 10, step_precision: 100}"), "p.yaml:10: load.step_precision: expected a "
                                                                     "percentage in (0, 100), e.g. 5, got 100"),
])
def test_a_wrong_plan_names_file_line_and_key(change, message):
    with pytest.raises(PlanError) as e:
        parse_plan(PLAN.replace(*change), "p.yaml")
    assert message in str(e.value)


def test_the_pareto_frontier_of_a_hand_made_set():
    # (tok/s per GPU, tok/s per user): c is beaten by b on both, e ties a on one axis and loses the other
    pts = {"a": (100, 50), "b": (300, 30), "c": (250, 20), "d": (500, 10), "e": (100, 40), "f": (500, 10)}
    flags = dict(zip(pts, pareto_flags(list(pts.values())), strict=True))
    assert flags == {"a": True, "b": True, "c": False, "d": True, "e": False, "f": True}  # equal twins both stay


def _cell(dep, workload, gpus, price, steps, cap_rps, repeat=1):
    return {"id": f"{dep}.{workload}.r{repeat}", "deployment": dep, "workload": workload, "repeat": repeat,
            "status": "done", "gpus": gpus, "gpu_hourly_usd": price,
            "capacity": {"rps": cap_rps, "users": 8, "output_tps": 1000.0, "level": 8},
            "steps": [{"level": u, "users": u, "output_tps": tps, "goodput_rps": tps / 100, "thin": False,
                       "slo_met": True, "ttft_p95_ms": 100.0 * u, "tpot_p95_ms": 20.0} for u, tps in steps]}


def test_frontier_points_are_priced_per_gpu_and_per_user():
    cells = [_cell("one", "chat", 2, 3.0, [(4, 800.0), (8, 1200.0)], 5.0)]
    p = frontier_points(cells)["chat"]
    assert [(x["tok_s_per_gpu"], x["tok_s_per_user"]) for x in p] == [(400.0, 200.0), (600.0, 150.0)]
    # $6/h over 800 tok/s: 6 / (800 × 3600) × 1e6
    assert p[0]["usd_per_1m_output_tokens"] == pytest.approx(6 / (800 * 3600) * 1e6, rel=1e-6)
    assert p[0]["usd_per_good_request"] == pytest.approx(6 / (8 * 3600), rel=1e-4)
    assert all(x["pareto"] for x in p)


def test_a_thin_step_is_not_a_point_and_the_frontiers_caption_says_so():
    """The slow deployment's 2- and 4-user steps had too few requests: the chart left them out while
    its caption said every measured step is a point (seen in the sweep's screenshot, issue 32 item 16)."""
    from llmload.sweep.report import FRONTIER_CAPTION

    cell = _cell("one", "chat", 1, 1.0, [(2, 100.0), (8, 400.0)], 5.0)
    cell["steps"][0]["thin"] = True
    assert [x["load"] for x in frontier_points([cell])["chat"]] == [8]
    assert "too few requests for a verdict is left out" in FRONTIER_CAPTION


def test_best_ranks_every_workload_of_a_plan_with_several_deployments():
    # two workloads × two deployments, with fleets' options given (empty): each workload gets its answer
    # (a name reused inside the loop once turned the options into a list at the second workload)
    cells = [_cell(dep, w, gpus, usd, [(8, 500.0)], rps) for w in ("chat", "long")
             for dep, gpus, usd, rps in (("cheap", 1, 2.0, 4.0), ("dear", 4, 3.0, 30.0))]
    best = best_deployments(cells, 20.0, None, 0.5, {})
    assert {w: b["deployment"] for w, b in best.items()} == {"chat": "cheap", "long": "cheap"}


def test_best_is_the_cheapest_fleet_at_the_target_and_the_margin_needs_repeats():
    # target 20 req/s, headroom 0.5: cheap holds 4 req/s on 1 GPU at $2 (10 replicas, $20/h);
    # dear holds 30 req/s on 4 GPUs at $3 (2 replicas, 8 GPUs, $24/h)
    cells = [_cell("cheap", "chat", 1, 2.0, [(8, 500.0)], 4.0), _cell("dear", "chat", 4, 3.0, [(8, 500.0)], 30.0)]
    best = best_deployments(cells, target_rps=20.0, target_users=None, headroom=0.5)["chat"]
    assert (best["deployment"], best["replicas"], best["gpus"]) == ("cheap", 10, 10)
    assert best["usd_per_month"] == pytest.approx(10 * 2.0 * 730)
    assert best["runner_up"]["deployment"] == "dear" and best["runner_up"]["gpus"] == 8
    assert best["margin_is_real"] is None  # one repeat: no noise estimate
    repeats = cells + [_cell("cheap", "chat", 1, 2.0, [(8, 500.0)], 4.1, 2),
                       _cell("dear", "chat", 4, 3.0, [(8, 500.0)], 29.0, 2)]
    assert best_deployments(repeats, 20.0, None, 0.5)["chat"]["margin_is_real"] is True
    overlap = cells + [_cell("cheap", "chat", 1, 2.0, [(8, 500.0)], 2.5, 2),  # 16 replicas: $32/h > dear's
                       _cell("dear", "chat", 4, 3.0, [(8, 500.0)], 29.0, 2)]
    assert best_deployments(overlap, 20.0, None, 0.5)["chat"]["margin_is_real"] is False


def test_a_deployment_without_capacity_in_any_repeat_is_not_an_answer():
    cells = [_cell("cheap", "chat", 1, 1.0, [(8, 500.0)], None), _cell("dear", "chat", 1, 9.0, [(8, 500.0)], 5.0)]
    assert best_deployments(cells, 10.0, None, 0.3)["chat"]["deployment"] == "dear"
    assert best_deployments(cells[:1], 10.0, None, 0.3)["chat"]["deployment"] is None


def test_a_deployments_gpu_metrics_reach_its_cells_locust_and_report():
    from llmload.sweep.cell_run import locust_command, report_options

    text = PLAN.replace('gpu_hourly_usd: 2}', 'gpu_hourly_usd: 2, gpu_metrics: "http://127.0.0.1:{port}/dcgm/metrics"}')
    plan = parse_plan(text + "usd_per_kwh: 0.15\n", "p.yaml")
    small, big = expand(plan)[0], expand(plan)[-1]
    cmd = locust_command(plan, small, "http://127.0.0.1:8123", "/tmp/x/run")
    assert cmd[cmd.index("--gpu-metrics") + 1] == "http://127.0.0.1:8123/dcgm/metrics"
    assert "--gpu-metrics" not in locust_command(plan, big, "http://127.0.0.1:8000", "/tmp/x/run")
    assert report_options(plan, small).usd_per_kwh == 0.15


def test_step_precision_goes_to_every_cell_with_the_plan_warm_up():
    from llmload.sweep.cell_run import locust_command

    plain = parse_plan(PLAN, "p.yaml")
    assert "--step-precision" not in locust_command(plain, expand(plain)[0], "http://x", "p")
    plan = parse_plan(PLAN.replace("step_seconds: 10}", "step_seconds: 10, warmup_s: 2, step_precision: 5}"), "p.yaml")
    assert plan.load.step_precision == 5.0
    cmd = locust_command(plan, expand(plan)[0], "http://x", "p")
    assert cmd[cmd.index("--step-precision") + 1] == "5" and cmd[cmd.index("--step-warmup-s") + 1] == "2"
    assert "10 s each at most (a step ends early once known to 5 %)" in dry_run_text(plan)


def test_a_serve_command_is_found_on_path_with_the_deployments_env_or_as_a_file(tmp_path, monkeypatch):
    from llmload.sweep.plan import Deployment
    from llmload.sweep.server import cannot_start

    tool = tmp_path / "bin" / "engine"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (tmp_path / "data.txt").write_text("")
    monkeypatch.chdir(tmp_path)

    def why(serve, env=None):
        return cannot_start(variants(parse_plan_of(serve, env))[0])

    def parse_plan_of(serve, env):
        class P:
            deployments = [Deployment("d", 1, 1.0, serve=serve, env=env or {})]
            params: dict = {}
        return P

    assert why("sh -c 'exit 0' {port}") is None
    assert why("bin/engine --port {port}") is None and why(f"{tool} --port {{port}}") is None
    assert why("engine --port {port}", {"PATH": str(tool.parent)}) is None  # the deployment's own PATH
    assert why("engine --port {port}") == ("deployments.d.serve: cannot start 'engine' (no such command on PATH): "
                                           "engine --port {port}")
    assert "(no such file)" in why("bin/nothing --port {port}")
    assert "(not an executable file)" in why("./data.txt --port {port}")
    assert cannot_start(variants(parse_plan(PLAN.replace("mock", "sh"), "plan.yaml"))[-1]) is None  # host: nothing
