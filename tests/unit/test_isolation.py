"""--isolation, pure: the options, the phase plan, the rows' phase marks, the shape's ticks on a fake
clock; and the report's per-class numbers and leakage on hand-made rows."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from llmload.files import COL, REQUESTS_COLUMNS
from llmload.metrics.slo import parse_slo
from llmload.report.model import ReportOptions
from llmload.report.sections.classes import classes_json, classes_tables, leakage
from llmload.report.steps import Step, find_steps
from llmload.shapes import isolation_shape
from llmload.shapes.isolation import ClassGroup, IsolationPlan, Phase, PhaseMarks, parse_isolation, phase_plan
from llmload.shapes.isolation_shape import IsolationShape

GROUPS = [ClassGroup("low", 10.0, ("LowUser",), 3.0), ClassGroup("high", 0.0, ("HighUser",), 1.0)]


def test_options_make_a_plan_and_bad_ones_name_their_flag():
    assert parse_isolation(False, "", "", "") is None
    assert parse_isolation(True, "", "", "") == IsolationPlan(30.0, 0, 100.0)
    assert parse_isolation(True, "4.5", "8", "20") == IsolationPlan(4.5, 8, 20.0)
    with pytest.raises(ValueError, match=r"--isolation-seconds '0': expected seconds > 0"):
        parse_isolation(True, "0", "", "")
    with pytest.raises(ValueError, match=r"--isolation-users '2.5': expected a whole number >= 1"):
        parse_isolation(True, "", "2.5", "")
    with pytest.raises(ValueError, match=r"--isolation-users needs --isolation"):
        parse_isolation(False, "", "8", "")


def test_the_plan_runs_each_class_alone_most_urgent_first_with_its_share_then_together():
    phases = phase_plan(IsolationPlan(5.0, 16, 50.0), GROUPS)
    assert phases == [Phase("alone:high", 4, ("HighUser",), (4,)), Phase("alone:low", 12, ("LowUser",), (12,)),
                      Phase("together", 16, ("HighUser", "LowUser"), (4, 12))]
    assert phase_plan(IsolationPlan(5.0, 0, 50.0), GROUPS, run_users=8)[-1].users == 8  # -u when no users given
    with pytest.raises(ValueError, match="at least two priority classes; the run has high"):
        phase_plan(IsolationPlan(), GROUPS[1:], 8)
    with pytest.raises(ValueError, match="--isolation-users 1: expected at least one user per class"):
        phase_plan(IsolationPlan(5.0, 1), GROUPS)


def _row(start: float, phase: str | None = None) -> tuple:
    row = [None] * len(REQUESTS_COLUMNS)
    row[COL.start_time], row[COL.phase] = start, phase
    return tuple(row)


def test_rows_get_the_phase_their_request_started_in_and_the_warmup_keeps_its_own():
    marks = PhaseMarks()
    rows = [_row(5.0), _row(9.0, "warmup")]
    assert marks.stamp(rows) == rows  # no phase began: untouched
    marks.begin("alone:high", 10.0)
    marks.begin("together", 20.0)
    got = marks.stamp([_row(9.0, "warmup"), _row(9.5), _row(10.0), _row(19.9), _row(20.0), _row(99.0)])
    assert [r[COL.phase] for r in got] == ["warmup", None, "alone:high", "alone:high", "together", "together"]


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def perf_counter(self) -> float:
        return self.t

    def time(self) -> float:
        return self.t + 1e9


def test_the_shape_ticks_each_phase_for_its_seconds_and_empties_the_run_between_phases(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(isolation_shape, "time", clock)
    began: list[tuple[str, float]] = []
    control = types.SimpleNamespace(phase_began=lambda label, at: began.append((label, at)))
    runner = types.SimpleNamespace(user_count=0, environment=types.SimpleNamespace(stop_timeout=0,
                                                                                  llmload_shapes=control))
    high, low = type("HighUser", (), {"fixed_count": 0}), type("LowUser", (), {"fixed_count": 0})
    shape = IsolationShape(IsolationPlan(10.0, 16, 50.0), GROUPS, {"HighUser": high, "LowUser": low})
    shape.runner = runner
    shape.reset_time()
    assert shape.tick() == (4, 50.0, [high])
    assert began == [("alone:high", 1e9 + 1000.0)]
    runner.user_count = 4
    clock.t += 9.9
    assert shape.tick() == (4, 50.0, [high])
    clock.t += 0.2
    assert shape.tick() == (0, 50.0)  # the high users stop before the low ones start
    clock.t += 1.0
    assert shape.tick() == (0, 50.0)
    runner.user_count = 0
    assert shape.tick() == (12, 50.0, [low]) and began[-1] == ("alone:low", 1e9 + clock.t)
    runner.user_count = 12
    clock.t += 10.0
    assert shape.tick() == (0, 50.0)
    clock.t += 31.0  # users that never stop: the next phase starts after --stop-timeout + 30 s anyway
    assert shape.tick() == (16, 50.0, [high, low])
    assert (high.fixed_count, low.fixed_count) == (4, 12)  # Locust is told each class's count
    clock.t += 10.0
    assert shape.tick() is None
    assert (high.fixed_count, low.fixed_count) == (0, 0)  # the classes' own, back at the end
    phases = shape.describe()["isolation"]["phases"]
    assert [p["phase"] for p in phases] == ["alone:high", "alone:low", "together"]
    assert all(p["started_at"] is not None for p in phases)
    assert [c["class"] for c in shape.describe()["isolation"]["classes"]] == ["high", "low"]


@pytest.mark.parametrize("weights, total", [
    ({"A": 1, "B": 1, "C": 1}, 16),  # Locust alone would split 16 as 6/5/5, the old plan ran 5/5/5 alone
    ({"A": 1, "C": 10}, 2),  # the old plan: 1 and 2 alone, 2 together
    ({"A": 1, "B": 2, "C": 3}, 7),  # B and C one priority class of two user classes
])
def test_each_user_class_runs_the_same_users_alone_as_together_under_locusts_own_dispatcher(weights, total):
    from locust import User
    from locust.dispatch import UsersDispatcher
    from locust.runners import WorkerNode

    classes = {n: type(n, (User,), {"weight": w, "abstract": False}) for n, w in weights.items()}
    members = {"a": ["A"], "c": [n for n in ("B", "C") if n in weights]}
    groups = [ClassGroup(g, rank, tuple(ms), float(sum(weights[m] for m in ms)), tuple(float(weights[m]) for m in ms))
              for rank, (g, ms) in enumerate(members.items())]
    shape = IsolationShape(IsolationPlan(1.0, total, 1000.0), groups, classes)
    shape.runner = types.SimpleNamespace(user_count=0, environment=types.SimpleNamespace(stop_timeout=0))
    dispatcher = UsersDispatcher([WorkerNode("w1"), WorkerNode("w2")], list(classes.values()))
    got: dict[str, dict[str, int]] = {}
    for phase in shape.phases:
        shape._phase_from, shape._index = None, shape.phases.index(phase)
        users, rate, user_classes = shape.tick()
        dispatcher.new_dispatch(users, rate, user_classes)
        on_workers = list(dispatcher)[-1]
        got[phase.label] = {n: sum(w[n] for w in on_workers.values()) for n in classes}
        assert sum(got[phase.label].values()) == users
        dispatcher.new_dispatch(0, rate)  # the shape empties the run between phases
        list(dispatcher)
    assert sum(got["together"].values()) == total
    for g, ms in members.items():
        assert {m: got[f"alone:{g}"][m] for m in ms} == {m: got["together"][m] for m in ms}


def test_leakage_is_the_move_from_alone_to_together_in_ms_and_percent():
    assert leakage(120.0, 150.0) == {"ms": 30.0, "pct": 25.0}
    assert leakage(200.0, 190.0) == {"ms": -10.0, "pct": -5.0}
    assert leakage(None, 150.0) == {"ms": None, "pct": None}
    assert leakage(0.0, 5.0) == {"ms": 5.0, "pct": None}


def _frame(spec: list[tuple[str, str, str, float, int, float, float]]) -> pd.DataFrame:
    """Rows of (phase, class, scenario, start, http status, ttft, tpot): status from the HTTP status."""
    df = pd.DataFrame(spec, columns=["phase", "priority", "scenario", "start_time", "http_status", "ttft_ms",
                                     "tpot_ms"])
    df["status"] = np.where(df["http_status"] == 200, "ok", np.where(df["http_status"] == 429, "rate_limited",
                                                                     "http_5xx"))
    df.loc[df["http_status"] != 200, ["ttft_ms", "tpot_ms"]] = np.nan
    for c in ("phase", "priority", "scenario", "status"):
        df[c] = df[c].astype("category")
    df["ok"] = (df["status"] == "ok").to_numpy()
    return df.sort_values("start_time", kind="stable").reset_index(drop=True)


def _report(df: pd.DataFrame, slos: list[str], manifest: dict | None = None, steps: list[Step] = ()) -> object:
    return types.SimpleNamespace(df=df, warmup_s=1.0, manifest=manifest, overall=types.SimpleNamespace(steps=steps),
                                 options=ReportOptions(slos=[parse_slo(s) for s in slos]))


def test_each_class_gets_its_attainment_shed_rate_and_verdict_on_its_own_scenarios_slos():
    rows = [(None, "high", "chat", 1.0 + i, 200, 100.0 + i, 10.0) for i in range(10)]
    rows += [(None, "low", "batch", 1.5 + i, 200, 950.0 + 100 * i, 20.0) for i in range(8)]
    rows += [(None, "low", "batch", 2.5, 429, 0, 0), (None, "low", "batch", 3.5, 503, 0, 0)]
    steps = [Step(users=4, start=0.0, end=100.0, measured_from=0.0)]
    data = classes_json(_report(_frame(rows), ["ttft_p95_ms=1000", "chat:ttft_p95_ms=200"], steps=steps))
    pc = data["priority_classes"]
    assert pc["judged_on"] == "the measured windows of the run's steps" and "isolation" not in data
    high, low = pc["classes"]["high"], pc["classes"]["low"]
    assert high["shed_rate"] == 0.0 and low["shed_rate"] == 0.2 and low["shed"] == 2 and low["requests"] == 10
    # high is judged by chat's scoped SLO (it replaces the unscoped one there) and the error budget
    assert set(high["slos"]) == {"chat:ttft_p95_ms=200", "error_rate=0.01"}
    assert high["slos"]["chat:ttft_p95_ms=200"]["attainment"] == 1.0 and high["slo_met"] is True
    # low: 1 of 10 requests within 1000 ms (950); the two shed ones never attain
    lo = low["slos"]["ttft_p95_ms=1000"]
    assert lo["attainment"] == 0.1 and lo["met"] is False and lo["n"] == 8
    assert low["slos"]["error_rate=0.01"]["value"] == 0.2 and low["slo_met"] is False
    (heading, header, table), = classes_tables(data)
    assert heading.startswith("Priority classes") and [r[0] for r in table] == ["high", "low"]
    assert table[1][3] == "20.0%" and table[1][-1] == "broken"
    assert "error_rate=0.01: 0.2000 (broken)" in table[1][6]


def test_a_model_slo_judges_each_class_on_its_requests_of_that_model_alone():
    rows = [(None, "high", "chat", 1.0 + i, 200, 100.0, 10.0) for i in range(10)]  # adapter-a: fast
    rows += [(None, "high", "chat", 1.5 + i, 200, 900.0, 10.0) for i in range(10)]  # adapter-b: slow
    rows += [(None, "low", "batch", 2.0 + i, 200, 900.0, 20.0) for i in range(10)]  # the base model
    df = _frame(rows)
    df["model"] = pd.Categorical(np.where(df["scenario"] == "batch", "base",
                                          np.where(df["ttft_ms"] < 500, "adapter-a", "adapter-b")))
    steps = [Step(users=4, start=0.0, end=100.0, measured_from=0.0)]
    data = classes_json(_report(df, ["adapter-a:ttft_p95_ms=200", "adapter-b:ttft_p95_ms=200"], steps=steps))
    high, low = data["priority_classes"]["classes"]["high"], data["priority_classes"]["classes"]["low"]
    a, b = high["slos"]["adapter-a:ttft_p95_ms=200"], high["slos"]["adapter-b:ttft_p95_ms=200"]
    assert (a["n"], a["value"], a["met"], a["attainment"]) == (10, 100.0, True, 1.0)  # adapter-a's rows alone
    assert (b["n"], b["met"], b["attainment"]) == (10, False, 0.0) and high["slo_met"] is False
    assert set(low["slos"]) == {"error_rate=0.01"} and low["slo_met"] is True  # no request of either adapter


def test_an_isolation_run_reports_each_class_alone_vs_together_and_judges_the_together_phase():
    rows = [("alone:high", "high", "chat", 0.5, 200, 10_000.0, 50.0)]  # the phase's warm-up: left out
    rows += [("alone:high", "high", "chat", 2.0 + i / 10, 200, 100.0, 10.0) for i in range(20)]
    rows += [("alone:low", "low", "batch", 10.0, 200, 1.0, 1.0)]
    rows += [("alone:low", "low", "batch", 12.0 + i / 10, 200, 300.0, 30.0) for i in range(20)]
    rows += [("together", "high", "chat", 22.0 + i / 10, 200, 150.0, 12.0) for i in range(20)]
    rows += [("together", "low", "batch", 22.0 + i / 10, 200, 900.0, 60.0) for i in range(20)]
    manifest = {"shape": {"isolation": {"classes": [{"class": "high", "rank": 0}, {"class": "low", "rank": 10}]}}}
    df = _frame(rows)
    assert len(find_steps(df.assign(level=4.0))[0]) == 3  # a step per phase, at one user count
    data = classes_json(_report(df, ["ttft_p95_ms=500"], manifest))
    assert data["priority_classes"]["judged_on"] == "the together phase after its 1-s warm-up"
    assert data["priority_classes"]["classes"]["high"]["slo_met"] is True
    assert data["priority_classes"]["classes"]["low"]["slos"]["ttft_p95_ms=500"]["attainment"] == 0.0
    iso = data["isolation"]
    assert iso["classes"] == ["high", "low"] and iso["most_urgent"] == "high"
    high = iso["per_class"]["high"]
    assert high["alone"]["ttft_p95_ms"] == 100.0 and high["alone"]["requests"] == 20
    assert high["together"]["ttft_p95_ms"] == 150.0
    assert high["leakage"]["ttft_p95_ms"] == {"ms": 50.0, "pct": 50.0}
    assert high["leakage"]["tpot_p95_ms"] == {"ms": 2.0, "pct": 20.0}
    assert iso["leakage"] == high["leakage"]
    assert iso["per_class"]["low"]["leakage"]["ttft_p95_ms"] == {"ms": 600.0, "pct": 200.0}
    tables = dict((h, rows) for h, _, rows in classes_tables(data))
    iso_rows = tables["Isolation: each class alone vs together"]
    assert iso_rows[0][:6] == ["high (most urgent)", "TTFT p95", "100.00", "150.00", "50.00", "+50.0 %"]


def _run_with(scenario_text: str, *classes: tuple[str, str | None, int], shape: object = None):
    """A fake environment and config: user classes (name, workload, weight) of one scenario file."""
    from llmload.workload.file.scenario import parse_scenario

    spec = parse_scenario(scenario_text, "s.yaml")
    users = [type(name, (), {"llmload_user": True, "workload": workload, "weight": weight})
             for name, workload, weight in classes]
    opts = types.SimpleNamespace(isolation=True, isolation_seconds="5", isolation_users="12",
                                 isolation_spawn_rate="", num_users=0)
    env = types.SimpleNamespace(parsed_options=opts, user_classes=users, shape_class=shape)
    config = types.SimpleNamespace(setup_for=lambda cls: types.SimpleNamespace(scenario=spec, workload=cls.workload))
    return env, config


TWO_CLASSES = ("workloads:\n  chat: {priority: {class: high, value: 0}}\n  bulk: {priority: {class: low, value: 9}}\n"
               "  more: {priority: {class: low, value: 5}}\n")


def test_the_run_groups_its_user_classes_by_priority_class():
    from llmload.plugin.run.isolation_setup import check_isolation

    env, config = _run_with(TWO_CLASSES, ("ChatUser", "chat", 1), ("BulkUser", "bulk", 2), ("MoreUser", "more", 1))
    setup = check_isolation(env, config)
    assert setup.plan == IsolationPlan(5.0, 12, 100.0)
    assert setup.groups == (ClassGroup("high", 0.0, ("ChatUser",), 1.0, (1.0,)),
                            ClassGroup("low", 5.0, ("BulkUser", "MoreUser"), 3.0, (2.0, 1.0)))
    env.parsed_options.isolation = False
    env.parsed_options.isolation_users = ""
    env.parsed_options.isolation_seconds = ""
    assert check_isolation(env, config) is None


@pytest.mark.parametrize("classes, shape, message", [
    ((("ChatUser", "chat", 1), ("AllUser", None, 1)), None,
     r"--isolation: AllUser draws workloads of several priority classes \(high, low\)"),
    ((("ChatUser", "chat", 1),), None, r"--isolation needs at least two priority classes; the run has high"),
    ((("ChatUser", "chat", 1), ("BulkUser", "bulk", 1)), object(), r"--isolation runs its own phases; the "
     r"locustfile's shape object cannot run beside it"),
])
def test_a_run_isolation_cannot_split_fails_with_one_message(classes, shape, message):
    from llmload.plugin.options.option_checks import ConfigError
    from llmload.plugin.run.isolation_setup import check_isolation

    env, config = _run_with(TWO_CLASSES, *classes, shape=shape)
    with pytest.raises(ConfigError, match=message):
        check_isolation(env, config)


def test_the_reports_run_table_names_the_phases():
    from llmload.report.run_identity import manifest_rows

    shape = {"class": "IsolationShape", "isolation": {"seconds": 8.0, "phases": [
        {"phase": "alone:high", "users": 4}, {"phase": "together", "users": 12}]}}
    rows = dict(manifest_rows({"shape": shape}))
    assert rows["shape"] == "IsolationShape: 8.0 s per phase: alone:high (4 users), together (12 users)"


def test_a_whole_body_workload_under_isolation_is_one_error_saying_it_has_no_class():
    from llmload.plugin.options.option_checks import ConfigError
    from llmload.plugin.run.isolation_setup import check_isolation

    text = "defaults: {priority: {class: high, value: 0}}\nworkloads:\n  chat: {}\n  ingest: {endpoint: embeddings}\n"
    env, config = _run_with(text, ("ChatUser", "chat", 1), ("IngestUser", "ingest", 1))
    with pytest.raises(ConfigError) as e:
        check_isolation(env, config)
    assert "workloads.ingest (endpoint embeddings) sends whole-body requests, which have no priority: class" \
        in str(e.value), str(e.value)
