"""Histogram accuracy against numpy and exact merging; per-scenario stats."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmload.metrics.histogram import Histogram
from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.stats import LLMStats
from llmload.plugin.output.end_of_run import format_summary

QS = [1, 10, 50, 90, 95, 99, 99.9, 100]


@pytest.mark.parametrize("dist", ["lognormal", "uniform", "exponential", "bimodal"])
def test_percentiles_within_one_percent_of_numpy(dist):
    rng = np.random.default_rng(42)
    n = 50_000
    data = {
        "lognormal": rng.lognormal(3.0, 1.0, n),
        "uniform": rng.uniform(0.05, 5000.0, n),
        "exponential": rng.exponential(20.0, n) + 0.01,
        "bimodal": np.concatenate([rng.normal(30, 2, n // 2), rng.normal(900, 50, n // 2)]).clip(0.01),
    }[dist]
    h = Histogram()
    h.record_many(data.tolist())
    got = h.percentiles(QS)
    want = np.percentile(data, QS, method="inverted_cdf")
    for q, g, w in zip(QS, got, want, strict=True):
        assert abs(g - w) / w <= 0.01, (q, g, w)
    assert h.count == n and h.mean == pytest.approx(float(data.mean()))
    assert h.max == data.max() and h.min == data.min()


def test_merge_equals_the_histogram_of_the_union():
    rng = np.random.default_rng(7)
    parts = [rng.lognormal(2, 0.8, 3000).tolist() for _ in range(4)]
    whole = Histogram()
    for p in parts:
        whole.record_many(p)
    merged = Histogram()
    for p in parts:
        h = Histogram()
        h.record_many(p)
        merged.merge(Histogram.from_wire(h.to_wire()))  # through the wire format, as workers do
    assert merged.counts == whole.counts
    assert merged.percentiles(QS) == whole.percentiles(QS)
    assert merged.total == pytest.approx(whole.total)


def test_empty_and_tiny_values():
    h = Histogram()
    assert math.isnan(h.percentile(50))
    h.record(0.0)
    h.record(0.0005)
    assert h.percentile(50) == 0.0 and h.percentile(100) == 0.0005  # bucket 0: within 1 µs, p100 exact
    assert Histogram.from_wire(Histogram().to_wire()).count == 0


def _rec(scenario, status, ttft, tpot, tokens, itl=(), start=100.0):
    return RequestRecord(meta=RequestMeta("r", start, scenario), status=status, ttft_ms=ttft, tpot_ms=tpot,
                         e2e_ms=(ttft or 0) + 100, completion_tokens=tokens, prompt_tokens=10, itl_ms=list(itl),
                         itl_max_ms=max(itl) if itl else None)


def test_stats_only_feed_latency_from_ok_requests_and_merge_deltas():
    worker = LLMStats()
    worker.add(_rec("chat", "ok", 50.0, 10.0, 11, itl=[9, 10, 11]), track_delta=True)
    worker.add(_rec("chat", "truncated", 5000.0, 99.0, 3), track_delta=True)
    worker.add(_rec("rag", "ok", 80.0, 12.0, 5, start=101.0), track_delta=True)
    master = LLMStats()
    master.merge_wire(worker.take_delta())
    assert worker.take_delta() == {}
    rows = {r["scenario"]: r for r in master.rows()}
    assert rows["chat"]["requests"] == 2 and rows["chat"]["ok"] == 1 and rows["chat"]["truncated"] == 1
    assert rows["chat"]["max_ttft_ms"] == 50.0  # the truncated 5 s never reaches the percentiles
    assert rows["chat"]["output_tokens"] == 11
    assert rows["chat"]["median_itl_ms"] == pytest.approx(10.0, rel=0.01)
    assert rows["Aggregated"]["requests"] == 3
    assert "truncated 1" in format_summary(master.rows())


def test_queued_values_count_as_recorded_ones():
    import llmload.metrics.histogram as H

    rng = np.random.default_rng(3)
    lists = [rng.lognormal(3, 0.3, 127).tolist() for _ in range(200)]  # > PENDING_MAX values in all
    one_by_one, queued = Histogram(), Histogram()
    for values in lists:
        for v in values:
            one_by_one.record(v)
        queued.record_many(values)
        queued.record(0.0005)  # direct records mix with queued ones
        one_by_one.record(0.0005)
    assert sum(len(v) for v in lists) > H.PENDING_MAX
    assert queued.counts == one_by_one.counts and queued.count == one_by_one.count
    assert queued.min == one_by_one.min and queued.max == one_by_one.max
    assert queued.percentiles(QS) == one_by_one.percentiles(QS)


def test_tracked_requests_are_counted_once_whether_or_not_the_delta_was_taken():
    stats = LLMStats()
    for i in range(5):
        stats.add(_rec("chat", "ok", 50.0 + i, 10.0, 11, itl=[9, 10, 11]), track_delta=True)
    before = stats.rows()
    assert before[0]["requests"] == 5 and before[0]["max_ttft_ms"] == 54.0
    wire = stats.take_delta()
    assert wire["chat"]["statuses"] == {"ok": 5} and stats.take_delta() == {}
    assert stats.rows() == before  # folded into the cumulative stats, not lost and not doubled
    stats.add(_rec("chat", "ok", 70.0, 10.0, 11), track_delta=True)
    assert stats.rows()[0]["requests"] == 6 and stats.rows()[0]["max_ttft_ms"] == 70.0
