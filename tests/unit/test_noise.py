"""The compare's noise verdict: unchanged runs are within noise, a 10 % TPOT regression is real."""

from __future__ import annotations

import numpy as np

from llmload.report.compare.noise import mean_difference, percentile_difference, regression_beyond


def _tpot_population(seed: int = 7) -> np.ndarray:
    # a step's TPOT as a batching engine gives it: ~30 ms, a spread of ~10 %, a slow tail
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.lognormal(np.log(30.0), 0.1, 9800), rng.lognormal(np.log(45.0), 0.2, 200)])


def test_two_runs_of_one_unchanged_configuration_are_within_noise_in_19_of_20_trials():
    pop = _tpot_population()
    rng = np.random.default_rng(1)
    verdicts = [percentile_difference(rng.choice(pop, 300), rng.choice(pop, 300), 95, seed=t).real
                for t in range(20)]
    assert sum(v is False for v in verdicts) >= 19, verdicts


def test_a_ten_percent_tpot_regression_is_real_and_fails_a_five_percent_gate():
    pop = _tpot_population()
    rng = np.random.default_rng(2)
    for t in range(5):
        d = percentile_difference(rng.choice(pop, 300), rng.choice(pop, 300) * 1.10, 95, seed=t)
        assert d.real is True and 4 < d.pct < 16, d
        assert regression_beyond(d, 5.0)
        assert not regression_beyond(d, 20.0)
    faster = percentile_difference(rng.choice(pop, 300), rng.choice(pop, 300) * 0.9, 95)
    assert faster.real and not regression_beyond(faster, 5.0)  # faster is not a regression


def test_too_few_samples_or_one_repeat_give_no_verdict():
    pop = _tpot_population()
    assert percentile_difference(pop[:10], pop[10:20] * 2, 95).real is None
    assert mean_difference([400.0], [300.0]).real is None


def test_repeats_decide_throughput():
    assert mean_difference([400, 405, 398, 402], [360, 362, 358, 361]).real is True
    assert mean_difference([400, 420, 380], [405, 390, 415]).real is False
    assert regression_beyond(mean_difference([400, 405, 398, 402], [360, 362, 358, 361]), 5.0,
                             higher_is_worse=False)
