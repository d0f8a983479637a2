"""llmload.server_metrics.series (CSV rows, a fleet combined, the live sample), the verdict's
robustness to a lone scrape, and llama.cpp's real /metrics (recorded from llama-server).
Pure: no sockets here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from llmload.server_metrics import (
    aggregate_step,
    detect_engine,
    map_samples,
    parse_exposition,
    server_verdict,
    snapshot,
)
from llmload.server_metrics.known import HistogramSnapshot, ServerSnapshot
from llmload.server_metrics.series import (
    FleetSeries,
    combine,
    csv_rows,
    failed_rows,
    format_labels,
    live_point,
    parse_labels,
    snapshot_from_rows,
)
from llmload.server_metrics.step_stats import StepServerStats
from tests.support.metric_scrapes import ENGINE_NAMES, scrapes

REAL_LLAMACPP = Path(__file__).parent.parent / "fixtures" / "real" / "llamacpp" / "metrics.response.http"
INF = math.inf


def test_labels_round_trip_with_prometheus_escapes():
    labels = (("a", 'say "hi"'), ("b", "C:\\tmp"), ("c", "two\nlines"), ("d", "p\\nq"), ("le", "+Inf"))
    text = format_labels(labels)
    assert text == 'a="say \\"hi\\"",b="C:\\\\tmp",c="two\\nlines",d="p\\\\nq",le="+Inf"'
    assert parse_labels(text) == labels
    assert parse_labels("") == () and format_labels({}) == ""


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_csv_rows_rebuild_the_same_snapshot_and_drop_only_raw_buckets(engine):
    body = scrapes(engine)[1][1]
    exposition = parse_exposition(body)
    mapped = map_samples(exposition, engine)
    rows = csv_rows(104.0, "http://x/metrics", mapped, engine=engine, duration_s=0.0123)
    assert rows[0] == (104.0, "http://x/metrics", "up", f'engine="{engine}"', 1)
    assert rows[1] == (104.0, "http://x/metrics", "scrape_duration_seconds", "", 0.0123)
    rebuilt = snapshot_from_rows([(m, lab, v) for _, _, m, lab, v in rows], engine)
    assert rebuilt == snapshot(exposition, engine)
    dropped = {m.metric for m in mapped} - {r[2] for r in rows}
    assert all(m.endswith("_bucket") and not m.startswith("server_") for m in dropped)
    kept_raw_hist = {r[2] for r in rows if r[2].endswith(("_sum", "_count")) and not r[2].startswith("server_")}
    if engine == "tgi":  # 1,702 samples; 1,024 of them tgi_batch_next_size buckets
        assert len(mapped) == 1702 and len(rows) == 160
        assert "tgi_batch_next_size_count" in kept_raw_hist and "tgi_batch_next_size_bucket" in dropped
    if engine == "vllm":
        assert len(rows) == 256 and "vllm:iteration_tokens_total_bucket" in dropped
        assert "vllm:iteration_tokens_total_sum" in kept_raw_hist


def test_failed_scrapes_are_up_zero_rows():
    assert failed_rows(3.14159, "u", 2.0) == [(3.142, "u", "up", "", 0), (3.142, "u", "scrape_duration_seconds", "",
                                                                         2.0)]


def _snap(running: float, waiting: float, kv: float, gen: float, ttft: tuple[float, ...] = (0.0, 0.0, 0.0),
          engine: str = "vllm") -> ServerSnapshot:
    buckets = ((0.1, ttft[0]), (0.5, ttft[1]), (INF, ttft[2]))
    return ServerSnapshot(engine, gauges={"requests_running": running, "requests_waiting": waiting,
                                          "kv_cache_usage": kv},
                          counters={"generation_tokens": gen},
                          histograms={"server_ttft_seconds": HistogramSnapshot(buckets, ttft[2], ttft[2] * 0.2)})


def test_a_fleet_adds_up_and_its_kv_is_the_fullest_replica():
    a = _snap(10, 2, 0.5, 1000, (4, 8, 10))
    b = _snap(6, 0, 0.9, 500, (1, 2, 2))
    c = combine([a, b])
    assert c.gauges == {"requests_running": 16, "requests_waiting": 2, "kv_cache_usage": 0.9}
    assert c.counters == {"generation_tokens": 1500}
    assert c.histograms["server_ttft_seconds"].buckets == ((0.1, 5), (0.5, 10), (INF, 12))
    assert combine([a, _snap(1, 1, 0.1, 1, engine="sglang")]).engine == "mixed"


def test_a_failed_endpoint_keeps_its_last_scrape_so_counters_do_not_reset():
    fleet = FleetSeries()
    assert fleet.add(0.0, {"a": None}) is None and fleet.points == []  # nobody has answered yet
    fleet.add(2.0, {"a": _snap(1, 0, 0.1, 100), "b": _snap(1, 0, 0.2, 1000)})
    fleet.add(4.0, {"a": _snap(1, 0, 0.1, 300), "b": None})           # b failed: its 1000 stands
    fleet.add(6.0, {"a": _snap(1, 0, 0.1, 500), "b": _snap(1, 0, 0.2, 1400)})
    gen = [(t, s.counters["generation_tokens"]) for t, s in fleet.points]
    assert gen == [(2.0, 1100), (4.0, 1300), (6.0, 1900)]
    assert fleet.answered == {"a": True, "b": True}
    assert aggregate_step(fleet.points, 2.0, 6.0).generation_tps == pytest.approx(800 / 4)


def test_live_point_is_the_newest_gauges_and_the_last_windows_rates():
    points = [(t, _snap(8, 1, 0.42, 100 * t, (t, 2 * t, 2 * t))) for t in (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0)]
    p = live_point(points, 12.0, window_s=10.0)
    assert p["time"] == 12.0 and p["running"] == 8 and p["waiting"] == 1 and p["kv_usage_pct"] == 42.0
    assert p["generation_tps"] == 100.0  # 2 → 12 s: +1000 tokens
    # 2 → 12 s: 10 more under 0.1 s, 10 more in (0.1, 0.5]: p50 at the 0.1 bound, p95 inside the second bucket
    assert p["ttft_p50_ms"] == pytest.approx(100.0) and p["ttft_p95_ms"] == pytest.approx(460.0)
    assert live_point([], 1.0) is None


def test_window_mean_of_a_histogram_is_exact():
    points = [(0.0, _snap(1, 0, 0, 0, (2, 4, 5))), (4.0, _snap(1, 0, 0, 0, (6, 10, 15)))]
    # sums are count × 0.2: (15 − 5) × 0.2 / 10 = 0.2 s
    assert aggregate_step(points, 0.0, 4.0).ttft_mean_ms == pytest.approx(200.0)


def test_a_lone_scrape_of_arrivals_is_not_a_queue():
    """Closed-loop users that finish together come back together and wait one engine step: a scrape
    that lands there sees a burst of waiting requests that is no queue."""
    burst = StepServerStats(0.0, 4.0, kv_usage_max=0.1, running_mean=3.0, waiting_mean=1.0, waiting_median=0.0,
                            waiting_trend_per_s=1.5)
    assert server_verdict(burst).limited_by == "not_enough_evidence"  # not queueing; one step tells no more
    queue = StepServerStats(0.0, 4.0, kv_usage_max=0.1, running_mean=8.0, waiting_mean=4.0, waiting_median=4.0)
    assert server_verdict(queue).limited_by == "queueing"
    # a big batch always has a few requests waiting for the next step: not a queue
    big = StepServerStats(0.0, 10.0, kv_usage_max=0.2, running_mean=32.0, waiting_mean=0.8, waiting_median=1.0)
    assert server_verdict(big).limited_by == "not_enough_evidence"
    growing = StepServerStats(0.0, 10.0, kv_usage_max=0.2, running_mean=32.0, waiting_mean=2.0,
                              waiting_median=2.0, waiting_trend_per_s=0.5)
    assert server_verdict(growing).limited_by == "queueing"


def test_real_llamacpp_metrics_map_with_the_cached_prompt_counter():
    """Recorded from llama.cpp 0c1e57098 (see the llamacpp branch's fixtures): its prompt counter
    leaves out the cached tokens, which it counts apart."""
    raw = REAL_LLAMACPP.read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"200 OK" in head and b"text/plain; version=0.0.4" in head
    exposition = parse_exposition(body, source=str(REAL_LLAMACPP))
    assert detect_engine(exposition) == "llamacpp"
    snap = snapshot(exposition)
    assert snap.gauges == {"requests_running": 0.0, "requests_waiting": 0.0}
    assert snap.counters == {"prefix_cache_queries_tokens": 47 + 58, "prefix_cache_hits_tokens": 58,
                             "prompt_tokens": 47 + 58, "generation_tokens": 32}
    rows = {m.metric: m.value for m in map_samples(exposition, "llamacpp")}
    assert rows["prompt_tokens"] == 105 and rows["llamacpp:prompt_tokens_total"] == 47  # the raw one stays
    assert rows["prefix_cache_hits_tokens"] == 58 and "llamacpp:prompt_tokens_cached_total" not in rows
    assert rows["llamacpp:n_busy_slots_per_decode"] == 1


def test_llamacpp_without_the_cached_counter_still_counts_prompts():
    body = "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 40\n"
    snap = snapshot(parse_exposition(body))
    assert snap.counters == {"prompt_tokens": 40.0}
    assert [(m.metric, m.value) for m in map_samples(parse_exposition(body), "llamacpp")] == [("prompt_tokens", 40.0)]
