"""models: mixes: the draw (weights and Zipf, per request and per session), the scenario section and its
errors, SLO scopes that name a model, their verdict, the per-model stats and their merge, the cost split."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from llmload.metrics import record as R
from llmload.metrics.slo import SLO, parse_slo, scope_models, slos_for, with_error_budget
from llmload.metrics.stats import AGGREGATED, LLMStats
from llmload.metrics.step_verdict import BROKEN, WindowRows, judge_step
from llmload.report.sections.models import split_cost
from llmload.workload.file.scenario import ScenarioError, parse_scenario
from llmload.workload.model_mix import ModelPicker, weighted_mix, zipf_mix

N = 20_000


def within_4_sigma(counts: Counter, n: int, shares: dict[str, float]) -> None:
    for name, p in shares.items():
        sigma = math.sqrt(n * p * (1 - p))
        assert abs(counts[name] - n * p) <= 4 * sigma, (name, counts[name], n * p, sigma)


def scenario(models_yaml: str, extra: str = "") -> object:
    return parse_scenario(f"workloads:\n  w:\n    models: {models_yaml}\n{extra}", "s.yaml")


def test_weights_are_drawn_per_request_in_their_shares_with_a_fixed_seed():
    mix = weighted_mix({"base": 5, "adapter-a": 3, "adapter-b": 2})
    assert mix.shares == pytest.approx((0.5, 0.3, 0.2))
    picker = ModelPicker(mix, seed=7)
    counts = Counter(picker.pick() for _ in range(N))
    within_4_sigma(counts, N, {"base": 0.5, "adapter-a": 0.3, "adapter-b": 0.2})
    a, b, other = ModelPicker(mix, seed=7), ModelPicker(mix, seed=7), ModelPicker(mix, seed=8)
    drawn = [a.pick() for _ in range(200)]
    assert drawn == [b.pick() for _ in range(200)]  # the run's seed decides
    assert drawn != [other.pick() for _ in range(200)]


def test_zipf_spreads_over_n_adapters_by_rank_and_the_base_takes_its_share():
    mix = zipf_mix(n=16, s=1.1, prefix="adapter-", base="base-model", base_share=0.2)
    ranks = [1 / k ** 1.1 for k in range(1, 17)]
    expect = {"base-model": 0.2, **{f"adapter-{k}": 0.8 * r / sum(ranks) for k, r in enumerate(ranks, start=1)}}
    assert dict(zip(mix.names, mix.shares, strict=True)) == pytest.approx(expect)
    picker = ModelPicker(mix, seed=3)
    counts = Counter(picker.pick() for _ in range(N))
    within_4_sigma(counts, N, expect)
    assert counts["adapter-1"] > counts["adapter-2"] > counts["adapter-8"]
    assert zipf_mix(n=3, first=0).names == ("adapter-0", "adapter-1", "adapter-2")


def test_per_session_keeps_one_model_for_every_request_of_a_session():
    picker = ModelPicker(weighted_mix({"a": 1, "b": 1, "c": 1}, per="session"), seed=5)
    sessions = {f"s-{i}": {picker.pick(f"s-{i}") for _ in range(4)} for i in range(300)}
    assert all(len(models) == 1 for models in sessions.values())
    counts = Counter(next(iter(m)) for m in sessions.values())
    within_4_sigma(counts, 300, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert len({picker.pick("") for _ in range(60)}) == 3  # no session: a draw per request


def test_the_models_section_spellings():
    w = scenario("{base: 0.5, adapter-a: 0.3, adapter-b: 0.2}").workloads[0]
    assert w.models.names == ("base", "adapter-a", "adapter-b") and w.models.per == "request"
    w = scenario("[a, b]").workloads[0]
    assert w.models.shares == (0.5, 0.5)
    w = scenario("{per: session, weights: {per: 1, x: 3}}").workloads[0]
    assert w.models.names == ("per", "x") and w.models.per == "session" and w.models.shares == (0.25, 0.75)
    w = scenario("{zipf: {n: 4, s: 1.0, prefix: lora-, base: b, base_share: 0.5}}").workloads[0]
    assert w.models.names == ("b", "lora-1", "lora-2", "lora-3", "lora-4") and w.models.shares[0] == 0.5
    spec = parse_scenario("defaults: {model: m}\nworkloads:\n  w:\n    models: [a]\n", "s.yaml")
    assert spec.workloads[0].models.names == ("a",)  # the defaults' model gives way


@pytest.mark.parametrize("models,extra,message", [
    ("{base: 0.5, adapter-a: 0}", "", "s.yaml:3: workloads.w.models.adapter-a: expected a number > 0, got 0"),
    ("{base: -1}", "", "workloads.w.models.base: expected a number > 0, got -1"),
    ("{zipf: {n: 4, ss: 2}}", "", "workloads.w.models.zipf.ss: unknown key; did you mean s?"),
    ("{per: always, weights: [a]}", "", "workloads.w.models.per: expected request or session, got 'always'"),
    ("{weights: [a], zipf: {n: 2}}", "", "workloads.w.models: expected either weights: or zipf:, not both"),
    ("{zipf: {n: 2, base: b}}", "", "workloads.w.models.zipf.base_share: missing"),
    ("{zipf: {n: 2, base: b, base_share: 1}}", "", "expected a share between 0 and 1"),
    ("{zipf: {s: 1}}", "", "workloads.w.models.zipf.n: missing"),
    ("[a, a]", "", "workloads.w.models: 'a' is listed twice"),
    ("{}", "", "workloads.w.models: expected a mapping of model names to weights"),
    ("[a]", "    model: m\n", "workloads.w.models: does not go with model:"),
    ("[a, b]", "    endpoint: embeddings\n", "workloads.w.models: does not go with endpoint embeddings"),
])
def test_bad_models_sections_get_one_line_naming_the_file_and_key(models, extra, message):
    with pytest.raises(ScenarioError) as e:
        scenario(models, extra)
    assert message in str(e.value) and str(e.value).startswith("s.yaml") and "\n" not in str(e.value)


def test_a_slo_scope_may_name_a_model_but_not_a_name_that_is_both():
    slos = [parse_slo("adapter-a:ttft_p95_ms=800"), parse_slo("chat:tpot_p95_ms=50"), parse_slo("e2e_p95_ms=9000")]
    scoped = scope_models(slos, {"chat"}, {"adapter-a", "adapter-b"})
    assert scoped[0] == SLO("ttft_p95_ms", 800.0, None, "adapter-a")
    assert scoped[0].text() == "adapter-a:ttft_p95_ms=800" and scoped[0].key == "adapter-a:ttft_p95_ms"
    assert scoped[1:] == slos[1:]
    with pytest.raises(ValueError, match="'chat' is both a scenario and a model"):
        scope_models([parse_slo("chat:ttft_p95_ms=1")], {"chat"}, {"chat"})
    with pytest.raises(ValueError, match="a task SLO is judged over a scenario's tasks"):
        scope_models([parse_slo("adapter-a:task_p95_s=1")], {"chat"}, {"adapter-a"})
    # a model SLO replaces no unscoped one, and applies wherever the model's requests are
    mine = SLO("ttft_p95_ms", 800.0, None, "adapter-a")
    unscoped = SLO("ttft_p95_ms", 2000.0)
    assert slos_for([mine, unscoped], "chat") == [mine, unscoped]
    assert with_error_budget([mine, SLO("error_rate", 0.1, None, "adapter-a")], 0.01)[-1] == SLO("error_rate", 0.01)


def test_a_model_slo_is_judged_on_that_models_requests_alone():
    n = 40
    models = np.array(["adapter-a"] * n + ["adapter-b"] * n, dtype=object)
    ttft = np.array([100.0] * n + [900.0] * n)
    rows = WindowRows(np.array(["ok"] * 2 * n, dtype=object), np.array(["chat"] * 2 * n, dtype=object),
                      {"ttft_ms": ttft}, models)
    slos = scope_models([parse_slo("adapter-a:ttft_p95_ms=500"), parse_slo("adapter-b:ttft_p95_ms=500")],
                        {"chat"}, {"adapter-a", "adapter-b"})
    v = judge_step(rows, slos, 30, {"chat"}, 10.0, scope="chat")
    assert v.state == BROKEN and v.broken == ["adapter-b:ttft_p95_ms"]
    assert v.slo["adapter-a:ttft_p95_ms"]["met"] and v.slo["adapter-a:ttft_p95_ms"]["value"] == 100.0
    thin = judge_step(rows, [*slos, SLO("ttft_p95_ms", 500.0, None, "adapter-c")], 30, {"chat"}, 10.0, "chat")
    assert thin.thin and "adapter-c: only 0 ok requests (< 30)" in thin.why
    from_rows = WindowRows.from_tuples([rec(i, "chat", m).row() for i, m in enumerate(models)], {"ttft_ms"})
    assert list(from_rows.model) == list(models)


def rec(i: int, scenario: str, model: str, ttft: float = 50.0) -> R.RequestRecord:
    meta = R.RequestMeta(request_id=str(i), start_time=1000.0 + i * 0.01, scenario=scenario, model=model)
    return R.RequestRecord(meta=meta, status=R.OK, http_status=200, ttft_ms=ttft, tpot_ms=5.0, e2e_ms=ttft + 50,
                           itl_max_ms=6.0, prompt_tokens=10, completion_tokens=11, itl_ms=[5.0] * 10)


def test_per_model_stats_merge_exactly_from_workers_and_keep_the_scenario_rows():
    whole, master = LLMStats(), LLMStats()
    workers = [LLMStats(), LLMStats()]
    for i in range(200):
        model = ("adapter-a", "adapter-b", "base")[i % 3]
        r = rec(i, "chat" if i % 2 else "rag", model, ttft=10.0 + i)
        whole.add(r)
        workers[i % 2].add(r, track_delta=True)
        if i % 50 == 49:
            for w in workers:
                master.merge_wire(w.take_delta())
    for w in workers:
        master.merge_wire(w.take_delta())
    assert master.rows() == whole.rows()  # the scenario rows are what they were
    rows = master.model_rows()
    assert rows == whole.model_rows()
    keys = [(r["scenario"], r["model"]) for r in rows]
    assert keys[:3] == [("chat", "adapter-a"), ("chat", "adapter-b"), ("chat", "base")]
    assert keys[-3:] == [(AGGREGATED, "adapter-a"), (AGGREGATED, "adapter-b"), (AGGREGATED, "base")]
    assert sum(r["requests"] for r in rows if r["scenario"] != AGGREGATED) == 200
    assert list(rows[0])[-1] == "model" and rows[0]["p99_itl_ms"] is not None
    plain = LLMStats()
    plain.add(rec(1, "chat", ""), track_delta=True)
    assert "models" not in plain.take_delta()["chat"] and plain.model_rows() == []


def test_cost_is_split_by_each_models_share_of_tokens():
    split = split_cost(10.0, {"a": (300.0, 100.0), "b": (100.0, 100.0)}, {"a": 30, "b": 10}, 60.0)
    assert split["a"]["token_share"] == pytest.approx(400 / 600) and split["b"]["usd_per_hour"] == pytest.approx(10 / 3)
    # $/request: the model's dollars per hour over its own requests per hour (30 in 60 s: 1,800/h)
    assert split["a"]["usd_per_request"] == pytest.approx(10 * 400 / 600 / 1800, rel=1e-5)  # 8 decimals
    # every token costs the same: the same $ per million tokens for both
    assert split["a"]["usd_per_million_tokens"] == pytest.approx(split["b"]["usd_per_million_tokens"])
    weighted = split_cost(10.0, {"a": (300.0, 100.0), "b": (100.0, 100.0)}, {"a": 30, "b": 10}, 60.0, 4.0)
    assert weighted["a"]["token_share"] == pytest.approx(700 / 1200)  # prompt + 4 x completion
    assert split_cost(10.0, {"a": (0.0, 0.0)}, {"a": 0}, 60.0)["a"]["usd_per_hour"] is None


def test_the_live_window_and_the_llm_tab_have_a_row_per_model():
    from llmload.plugin.output.live import LiveHistory, LiveWindow
    from llmload.plugin.web.llm_tab import tab_rows

    live = LiveWindow(window_s=10)
    for i in range(30):
        live.add_row(rec(i, "chat", "adapter-a" if i % 3 else "adapter-b", ttft=10.0 + i).row())
    stats = LLMStats()
    stats.add(rec(0, "chat", "adapter-b"), track_delta=True)  # its per-chunk ITL comes with the stats delta
    live.add_itl_delta(stats.take_delta(), 1001.0)
    a, b = live.model_snapshot(now=1005.0, lag_s=1.0)
    assert (a["scenario"], a["model"], a["requests"], b["model"], b["requests"]) == ("chat", "adapter-a", 20,
                                                                                      "adapter-b", 10)
    assert b["itl_p99_ms"] == 5.0 and a["itl_p99_ms"] is None  # the per-chunk ITL of b's stream only
    (only,) = live.snapshot(now=1005.0, lag_s=1.0)
    assert only["requests"] == 30 and "model" not in only  # the scenario row is what it was
    history = LiveHistory()
    history.sample(live, 1005.0, 1.0, users=4, in_flight={"chat": 2}, health=[])
    assert [r["model"] for r in history.models_latest] == ["adapter-a", "adapter-b"]

    class View:
        run_finished = False

        def runner_state(self):
            return "running"

        def latest_rows(self):
            return history.latest()

        def model_rows(self):
            return history.models_latest

        def client_health(self):
            return []

        def server_samples(self):
            return []

        def stats_rows(self):
            return []

        def has_tasks(self):
            return False

    rows = tab_rows(View())
    assert [r["scenario"] for r in rows] == ["chat", "chat · adapter-a", "chat · adapter-b"]
    assert rows[1]["in_flight"] is None and rows[0]["in_flight"] == 2
