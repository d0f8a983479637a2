"""Precision stopping (llmload/shapes/precision.py): the interval of a percentile, when it is
"within PCT %", and the step ladder that ends a stable step early and a noisy or thin one at its cap."""

from __future__ import annotations

import numpy as np
import pytest

from llmload.files import COL, REQUESTS_COLUMNS
from llmload.metrics.intervals import mean_ci, quantile_ci
from llmload.metrics.slo import parse_slo
from llmload.shapes.precision import Estimate, PrecisionSteps, estimate, measured_slos, precise

T0 = 1000.0


def row(start: float, users: int, ttft: float, tpot: float = 5.0, e2e: float = 100.0, status: str = "ok",
        scenario: str = "chat") -> tuple:
    r: list = [None] * len(REQUESTS_COLUMNS)
    r[COL.start_time], r[COL.users], r[COL.status], r[COL.scenario] = start, users, status, scenario
    r[COL.ttft_ms], r[COL.tpot_ms], r[COL.e2e_ms] = ttft, tpot, e2e
    return tuple(r)


def test_the_percentile_interval_is_the_order_statistics_of_the_binomial_ranks():
    values = np.arange(1.0, 101.0)
    # n = 100, p = 0.95: ranks 95.5 ∓ 1.96·√4.75 → 91 and 100 (1-based)
    assert quantile_ci(values, 95) == (91.0, 100.0)
    e = estimate(parse_slo("ttft_p95_ms=500"), [row(T0 + i, 4, float(v)) for i, v in enumerate(values)])
    assert (e.n, e.lo, e.hi) == (100, 91.0, 100.0)
    assert e.value == pytest.approx(95.05)
    assert e.spread() == pytest.approx((100.0 - 95.05) / 95.05)  # the wider side (here the upper) decides
    # 71 samples cannot bound a p95 from above (the upper rank is past n): never precise
    assert quantile_ci(np.full(71, 40.0), 95)[1] is None
    open_side = Estimate("ttft_p95_ms", 71, 40.0, 40.0, None)
    assert open_side.spread() is None and not precise([open_side], 50)


def test_within_pct_means_both_sides_of_every_interval():
    tight = Estimate("ttft_p95_ms", 500, 100.0, 97.0, 104.0)  # −3 %, +4 %
    wide = Estimate("tpot_p95_ms", 500, 10.0, 9.8, 10.6)  # +6 %
    assert precise([tight], 5) and not precise([tight], 3.9)
    assert not precise([tight, wide], 5) and precise([tight, wide], 6)
    assert not precise([], 5)
    lo, hi = mean_ci(np.array([9.0, 10.0, 11.0]))
    assert (lo + hi) / 2 == pytest.approx(10.0) and hi - 10.0 == pytest.approx(1.959964 * 1.0 / np.sqrt(3))


def test_what_is_measured_the_latency_slos_else_ttft_and_tpot_p95():
    slos = [parse_slo("error_rate=0.01"), parse_slo("rag:ttft_p99_ms=900"), parse_slo("tpot_mean_ms=20")]
    assert [s.metric for s in measured_slos(slos)] == ["ttft_p99_ms", "tpot_mean_ms"]
    assert [s.metric for s in measured_slos([parse_slo("error_rate=0.01")])] == ["ttft_p95_ms", "tpot_p95_ms"]
    rows = [row(T0 + i, 4, 100.0, scenario="rag") for i in range(10)] + [row(T0 + i, 4, 9.0) for i in range(10)]
    assert estimate(parse_slo("rag:ttft_p99_ms=900"), rows).value == 100.0  # its scenario's rows only
    assert estimate(parse_slo("ttft_p95_ms=900"), [row(T0, 4, 5.0, status="timeout")]).value is None


def test_a_stable_step_ends_once_its_intervals_close_and_a_noisy_one_runs_to_its_cap():
    rng = np.random.default_rng(7)
    ladder = PrecisionSteps((4, 8), step_seconds=60, pct=5, slos=[parse_slo("ttft_p95_ms=500")], warmup_s=0,
                            floor=30, now=T0)
    # 4 users, a steady server: 10 requests/s, TTFT 40 ms ± 0.1 %
    ladder.add([row(T0 + i * 0.1, 4, 40.0 + 0.04 * rng.random()) for i in range(50)])
    assert ladder.users(T0 + 5.2) == 4  # 50 ok requests: the p95's upper side is still open
    ladder.add([row(T0 + i * 0.1, 4, 40.0 + 0.04 * rng.random()) for i in range(50, 101)])
    assert ladder.users(T0 + 10.3) == 8  # 101 samples bound it: within 5 %, 50 s before the cap
    first = ladder.log[0]
    assert (first["users"], first["ended"], first["seconds"]) == (4, "precise", 10.3)
    assert "within 5 %" in first["why"] and "ttft_p95_ms 40" in first["why"]
    # 8 users, a noisy server: TTFT lognormal with σ = 1 keeps its p95 interval at about −15 %/+20 %
    start = T0 + 10.3
    noisy = np.exp(np.log(200.0) + rng.normal(0, 1.0, 600))
    ladder.add([row(start + 0.1 * i, 8, float(v)) for i, v in enumerate(noisy)])
    assert ladder.users(start + 59.0) == 8
    assert ladder.users(start + 60.0) is None  # the cap, and the last step: the run is over
    last = ladder.log[1]
    assert (last["users"], last["ended"], last["seconds"]) == (8, "cap", 60.0)
    assert last["why"].startswith("not within 5 %: ttft_p95_ms")
    assert ladder.users(start + 61.0) is None
    assert ladder.describe()["step_log"] == ladder.log


def test_a_thin_step_runs_to_its_cap_and_says_it_was_thin():
    ladder = PrecisionSteps((2,), step_seconds=30, pct=10, slos=[], warmup_s=5, floor=30, now=T0)
    ladder.add([row(T0 + 1 + i, 2, 40.0) for i in range(20)])  # one a second: 15 from the warm-up on
    assert ladder.users(T0 + 29.9) == 2
    assert ladder.users(T0 + 30.0) is None
    assert ladder.log[0]["ended"] == "cap" and ladder.log[0]["why"].startswith("only 15 ok requests (< 30)")


def test_a_percentage_must_be_positive():
    with pytest.raises(ValueError, match="--step-precision 0: expected a percentage > 0"):
        PrecisionSteps((2,), 30, 0, [], 5, 30, T0)


def test_the_report_says_per_step_how_it_ended(tmp_path):
    import json

    from llmload.report import build_report
    from llmload.report.render import blocks, summary_text
    from tests.support.report_rows import req, write_csv

    rows = [req(T0 + i * 0.25, 4) | {"run_id": "r1"} for i in range(80)]
    rows += [req(T0 + 20 + i * 0.25, 8, ttft=200.0) | {"run_id": "r1"} for i in range(240)]
    prefix = write_csv(tmp_path / "run_requests.csv", rows)
    log = [{"users": 4, "started": T0, "seconds": 20.0, "ended": "precise", "why": "ttft_p95_ms 100 ±0.0 %: within "
            "5 % (60 ok requests)"}, {"users": 8, "started": T0 + 20, "seconds": 60.0, "ended": "cap",
                                      "why": "not within 5 %: ttft_p95_ms 200 ±9.0 %"}]
    (tmp_path / "run_run.json").write_text(json.dumps({"run_id": "r1", "shape": {
        "class": "Steps", "steps": [4, 8], "step_seconds": 60, "step_precision_pct": 5.0, "step_log": log}}))
    report = build_report(prefix)
    assert [(s.data["users"], s.data["ended"]) for s in report.overall.steps] == [(4, "precise"), (8, "cap")]
    assert report.overall.steps[1].data["ended_why"] == "not within 5 %: ttft_p95_ms 200 ±9.0 %"
    assert any(n.startswith("precision stop (--step-precision 5 %): 1 of 2 step(s) ended early")
               for n in report.notes), report.notes
    assert "steps: 4 users ended early, 8 users ran to the cap" in summary_text(report)
    table = next(b for b in blocks(report) if b.header and "step ended" in b.header)
    assert table.rows[0][-1] == "early: ttft_p95_ms 100 ±0.0 %: within 5 % (60 ok requests)"
    assert table.rows[1][-1].startswith("at the cap: not within 5 %")
