"""llmload.server_metrics: parse → known names → window maths → verdict.

The fixtures and the hand-worked numbers asserted here are described in
tests/fixtures/metrics/SOURCES.md.
"""

from __future__ import annotations

import math
import time

import pytest

from llmload.mock.engine.fixed_engine import FixedEngine
from llmload.mock.telemetry.prometheus import render_metrics
from llmload.server_metrics import (
    ENGINES,
    MAX_EXPOSITION_BYTES,
    ExpositionError,
    detect_engine,
    map_samples,
    parse_exposition,
    server_verdict,
    snapshot,
    token_rate_warning,
)
from llmload.server_metrics.step_stats import StepServerStats, aggregate_step
from llmload.server_metrics.window import (
    counter_increase,
    counter_rate,
    gauge_stats,
    gauge_trend,
    histogram_delta,
    histogram_quantile,
    hit_rate,
    window_quantiles,
)
from tests.support.metric_scrapes import ENGINE_NAMES, FIXTURES, scrapes

INF = math.inf




def step_stats(engine: str) -> StepServerStats:
    snaps = [(t, snapshot(parse_exposition(body, source=f"{engine}.prom"))) for t, body in scrapes(engine)]
    return aggregate_step(snaps, 100.0, 104.0)


# ---------------------------------------------------------------- parse

@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_each_fixture_parses_into_two_scrapes_of_its_engine(engine):
    pair = scrapes(engine)
    assert [t for t, _ in pair] == [100.0, 104.0]
    for _, body in pair:
        exposition = parse_exposition(body.encode(), source=f"{engine}.prom")
        assert detect_engine(exposition) == engine
        assert exposition.duplicates == 0
        assert len(exposition.samples) > 10


def test_fixture_samples_keep_labels_and_values():
    vllm = parse_exposition(scrapes("vllm")[0][1])
    labels = (("engine", "1"), ("model_name", "meta-llama/Llama-3.1-8B-Instruct"))
    assert vllm.samples[("vllm:kv_cache_usage_perc", labels)] == 0.58
    assert vllm.samples[("vllm:time_to_first_token_seconds_bucket", (("engine", "0"), ("le", "+Inf"),
                                                                     ("model_name", labels[1][1])))] == 100.0
    assert vllm.kind("vllm:prompt_tokens_total") == "counter"
    assert vllm.kind("vllm:iteration_tokens_total_bucket") == "histogram"  # a histogram named *_total
    sglang = parse_exposition(scrapes("sglang")[1][1])
    pid = [k for k in sglang.samples if k[0] == "sglang:num_retracted_reqs"]
    assert pid and dict(pid[0][1])["pid"] == "3141"  # multiprocess gauge without a mode
    llama = parse_exposition(scrapes("llamacpp")[0][1])
    assert llama.samples[("llamacpp:prompt_tokens_total", ())] == 1234560.0  # "1.23456e+06"
    # typed counter without _total: prometheus_client's parser renames it
    assert ("llamacpp:n_busy_slots_per_decode_total", ()) in llama.samples
    tgi = parse_exposition(scrapes("tgi")[0][1])
    assert tgi.samples[("tgi_request_count_total", ())] == 502.0
    assert tgi.kind("tgi_request_skipped_tokens") == "summary"
    assert tgi.samples[("tgi_request_duration_bucket", (("le", "0.00015000000000000001"),))] == 0.0


def test_a_whole_fixture_file_is_one_body_with_every_series_twice():
    exposition = parse_exposition((FIXTURES / "vllm.prom").read_text())
    later = parse_exposition(scrapes("vllm")[1][1])
    assert exposition.duplicates == len(later.samples)
    assert exposition.samples == later.samples  # the last value wins


def test_parser_edge_cases():
    body = "\n".join([
        "# HELP g a gauge",
        "# TYPE g gauge",
        'g{path="C:\\\\tmp",quote="say \\"hi\\"",nl="a\\nb"} NaN',
        "g_inf +Inf",
        "g_neg -Inf 1700000000000",
        "# TYPE w weird",                    # a type the parser does not know
        "w 3",
        "# TYPE c counter",                  # OpenMetrics spelling: samples carry _total
        "# UNIT c_seconds seconds",
        "c_total 5",
        "c_created 1.7e9",
        'h_bucket{le="1"} 3 # {trace_id="abc"} 0.5 1700000000.1',
        "",
        "  # a comment",
        "# TYPE g gauge",                    # the same family again, another series
        'g{path="D:"} 1',
        "big 12345678901234567890",
        "# EOF",
    ])
    e = parse_exposition(body)
    escaped = e.samples[("g", (("nl", "a\nb"), ("path", "C:\\tmp"), ("quote", 'say "hi"')))]
    assert math.isnan(escaped)
    assert e.samples[("g", (("path", "D:"),))] == 1.0
    assert e.samples[("g_inf", ())] == INF and e.samples[("g_neg", ())] == -INF
    assert e.samples[("w", ())] == 3.0 and e.kind("w") == "unknown"
    assert e.samples[("c_total", ())] == 5.0 and e.kind("c_total") == "counter" and e.kind("c_created") == "counter"
    assert e.samples[("h_bucket", (("le", "1"),))] == 3.0
    assert e.samples[("big", ())] == 1.2345678901234567e19
    assert e.duplicates == 0
    assert parse_exposition("").samples == {}


@pytest.mark.parametrize(("body", "line", "hint"), [
    ("ok 1\nfoo abc\n", 2, ""),
    ("ok 1\nbar{a=b} 1\n", 2, ""),
    ("# HELP x\n# TYPE x\nx 1\n", 2, ""),
    ("x{a=\"1\" 2\n", 1, ""),
    ('"# HELP llamacpp:prompt_tokens_total Number\\n# TYPE llamacpp:prompt_tokens_total counter\\n"', 1,
     "JSON-encoded string"),
    ('[{"iter": 1, "numActiveRequests": 3}]', 1, "/prometheus/metrics"),
    ("<html><body>404</body></html>\n", 1, "HTML"),
])
def test_malformed_body_gives_one_error_naming_source_and_line(body, line, hint):
    with pytest.raises(ExpositionError) as err:
        parse_exposition(body, source="http://gpu:8000/metrics")
    text = str(err.value)
    assert text.startswith(f"http://gpu:8000/metrics: line {line}: not a Prometheus text exposition line")
    assert hint in text


def test_non_utf8_body_is_refused():
    with pytest.raises(ExpositionError, match=r"srv: not UTF-8 text \(byte 2\)"):
        parse_exposition(b"x \xff\n", source="srv")


def test_huge_bodies_are_refused_before_parsing_and_the_cap_is_affordable():
    one = scrapes("vllm")[1][1]
    # Over the cap: refused at once, whatever the content.
    huge = b"x 1\n" * (MAX_EXPOSITION_BYTES // 4 + 1)
    t0 = time.perf_counter()
    with pytest.raises(ExpositionError, match="over the 2097152-byte cap"):
        parse_exposition(huge, source="srv")
    assert time.perf_counter() - t0 < 0.5
    with pytest.raises(ExpositionError, match="over the 100-byte cap"):
        parse_exposition(one, max_bytes=100)
    # Just under the cap: distinct series (engine label renumbered) all parse, linearly.
    copies = []
    size, k = 0, 0
    while size + len(one) < MAX_EXPOSITION_BYTES:
        part = one.replace('engine="0"', f'engine="{2 * k}"').replace('engine="1"', f'engine="{2 * k + 1}"')
        copies.append(part)
        size += len(part)
        k += 1
    body = "".join(copies)
    t0 = time.perf_counter()
    exposition = parse_exposition(body)
    elapsed = time.perf_counter() - t0
    single = parse_exposition(one)
    assert exposition.duplicates > 0  # HELP/TYPE repeat; series without an engine label repeat too
    per_copy = len([k for k in single.samples if "engine" in dict(k[1])])
    assert len(exposition.samples) >= per_copy * k
    # Generous bound (the machine is shared): measured ≈ 0.4 s for 2 MiB on the 2-core box.
    assert elapsed < 10.0, f"{len(body)} bytes took {elapsed:.2f} s"


# ---------------------------------------------------------------- known names

def test_vllm_samples_map_to_common_names_and_keep_the_rest():
    rows = map_samples(parse_exposition(scrapes("vllm")[0][1]), "vllm")
    by = {}
    for r in rows:
        by.setdefault(r.metric, []).append(r)
    model = "meta-llama/Llama-3.1-8B-Instruct"
    assert {(dict(r.labels)["engine"], r.value) for r in by["kv_cache_usage"]} == {("0", 0.62), ("1", 0.58)}
    assert sum(r.value for r in by["generation_tokens"]) == 178000.0
    assert sum(r.value for r in by["prefix_cache_hits_tokens"]) == 119000.0
    ttft_inf = [r for r in by["server_ttft_seconds_bucket"] if dict(r.labels)["le"] == "+Inf"]
    assert sorted(r.value for r in ttft_inf) == [100.0, 100.0]
    assert "server_itl_seconds_count" in by and "server_e2e_seconds_sum" in by
    # finished requests under their common name, every finished_reason kept as a label set
    assert sum(r.value for r in by["requests_finished"]) == 800.0 + 30.0 + 790.0 + 28.0
    stop0 = [r.value for r in by["requests_finished"]
             if dict(r.labels) == {"engine": "0", "finished_reason": "stop", "model_name": model}]
    assert stop0 == [800.0]
    # unknown metrics stay under their own names, labels untouched
    assert ("http_requests_total" in by and "vllm:request_time_per_output_token_seconds_bucket" in by
            and "vllm:cache_config_info" in by)
    # known ones are not repeated raw, and *_created timestamps are dropped
    assert not any(m.startswith(("vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds")) for m in by)
    assert not any(m.endswith("_created") for m in by)


def test_mock_engine_exposition_maps_with_vllm_v1_names():
    body = render_metrics(FixedEngine(), "mock-model", {"ok": 3, "error": 1})
    exposition = parse_exposition(body, source="llmload mock")
    assert detect_engine(exposition) == "vllm"
    snap = snapshot(exposition)
    assert snap.gauges == {"requests_running": 0.0, "requests_waiting": 0.0, "kv_cache_usage": 0.0}
    assert set(snap.histograms) == {"server_ttft_seconds", "server_itl_seconds", "server_queue_time_seconds",
                                    "server_e2e_seconds"}
    metrics = {r.metric for r in map_samples(exposition, "vllm")}
    assert "vllm:gpu_cache_usage_perc" not in metrics and "preemptions" in metrics
    assert "vllm:request_time_per_output_token_seconds_bucket" in metrics  # not a common metric: kept raw


def test_older_vllm_names_are_used_when_the_new_ones_are_missing():
    body = ('# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name="m"} 0.4\n'
            '# TYPE vllm:gpu_prefix_cache_queries_total counter\n'
            'vllm:gpu_prefix_cache_queries_total{model_name="m"} 30\n'
            '# TYPE vllm:gpu_prefix_cache_hits_total counter\nvllm:gpu_prefix_cache_hits_total{model_name="m"} 12\n')
    snap = snapshot(parse_exposition(body))
    assert snap.gauges == {"kv_cache_usage": 0.4}
    assert snap.counters == {"prefix_cache_queries_tokens": 30.0, "prefix_cache_hits_tokens": 12.0}


def test_label_filter_and_unknown_engines():
    exposition = parse_exposition(scrapes("vllm")[0][1])
    assert snapshot(exposition, labels={"model_name": "another-model"}).gauges == {}
    assert snapshot(exposition, labels={"model_name": "meta-llama/Llama-3.1-8B-Instruct"}).gauges["requests_running"] \
        == 46.0
    assert snapshot(exposition, labels={"engine": "1"}).gauges["requests_running"] == 22.0
    other = parse_exposition("# TYPE up gauge\nup 1\nfoo_total 3\n")
    assert detect_engine(other) is None
    assert snapshot(other).gauges == {} and snapshot(other).engine is None
    assert [(r.metric, r.value) for r in map_samples(other)] == [("up", 1.0), ("foo_total", 3.0)]


def test_tgi_kv_ratio_and_token_sums_are_derived():
    exposition = parse_exposition(scrapes("tgi")[1][1])
    snap = snapshot(exposition)
    assert snap.gauges == {"requests_running": 32.0, "requests_waiting": 9.0, "kv_cache_usage": 0.375}
    assert snap.counters == {"prompt_tokens": 520 * 512.0, "generation_tokens": 508 * 200.0, "requests_finished": 508.0}
    assert "server_ttft_seconds" not in snap.histograms
    metrics = {r.metric for r in map_samples(exposition, "tgi")}
    # derived rows are added; the gauges and histograms they come from stay raw
    assert {"kv_cache_usage", "prompt_tokens", "tgi_batch_current_max_tokens",
            "tgi_request_input_length_bucket"} <= metrics


def test_every_engine_table_uses_known_common_names():
    from llmload.server_metrics import COMMON
    for spec in ENGINES.values():
        assert set(spec.sources) <= set(COMMON), spec.engine


# ---------------------------------------------------------------- window maths on the fixtures

EXPECTED = {  # worked out by hand in tests/fixtures/metrics/SOURCES.md
    "vllm": dict(running_mean=53.0, running_max=60.0, waiting_mean=4.0, waiting_max=7.0, waiting_trend_per_s=1.5,
                 kv_usage_mean=0.795, kv_usage_max=0.97, preemptions=3.0, prompt_tps=5750.0, generation_tps=2300.0,
                 prefix_cache_hit_rate=0.5,
                 ttft_ms={"p50": 375.0, "p95": 875.0, "p99": 975.0},
                 itl_ms={"p50": (0.025 + 0.025 * 3600 / 7000) * 1000, "p95": 68.5, "p99": 88.5},
                 queue_time_ms={"p50": 200.0, "p95": 800.0}, e2e_ms={"p50": 7500.0}),
    "sglang": dict(running_mean=44.0, running_max=48.0, waiting_mean=3.5, waiting_trend_per_s=0.75,
                   kv_usage_mean=0.795, kv_usage_max=0.88, preemptions=1.0, prompt_tps=4500.0, generation_tps=1900.0,
                   prefix_cache_hit_rate=0.5,
                   ttft_ms={"p50": 290.0, "p95": 552.5, "p99": 590.5},
                   itl_ms={"p50": 16.781, "p99": (0.020 + 0.005 * 486.38 / 562) * 1000},
                   queue_time_ms={"p50": 0.0, "p95": 525.0}, e2e_ms={"p50": 3900.0}),
    "tgi": dict(running_mean=32.0, waiting_mean=6.0, waiting_max=9.0, waiting_trend_per_s=1.5,
                kv_usage_mean=0.3625, kv_usage_max=0.375, preemptions=None, prompt_tps=2560.0, generation_tps=900.0,
                prefix_cache_hit_rate=None, ttft_ms=None,
                queue_time_ms={"p50": 0.22168378200531006 * 1000,
                               "p95": (1.1222741464018822 + (1.6834112196028232 - 1.1222741464018822) * 8.1 / 9)
                               * 1000},
                itl_ms={"p50": (0.04378938903808594 + (0.0656840835571289 - 0.04378938903808594) * 9 / 18) * 1000},
                e2e_ms={"p50": (8.522269299239293 + (12.78340394885894 - 8.522269299239293) * 9 / 18) * 1000}),
    "llamacpp": dict(running_mean=4.0, waiting_mean=4.0, waiting_trend_per_s=1.0, kv_usage_max=None,
                     prompt_tps=1360.0, generation_tps=400.0, ttft_ms=None, itl_ms=None),
    "trtllm": dict(running_mean=64.0, waiting_mean=14.0, waiting_max=18.0, waiting_trend_per_s=2.0,
                   kv_usage_mean=0.535, kv_usage_max=0.55, prompt_tps=4000.0, generation_tps=1600.0,
                   prefix_cache_hit_rate=0.25,
                   ttft_ms={"p50": 1000.0, "p95": 2350.0}, itl_ms={"p50": 37.5},
                   queue_time_ms={"p50": 500.0, "p95": 1450.0}, e2e_ms={"p50": 12500.0}),
}


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_fixture_windows_give_the_hand_worked_numbers(engine):
    stats = step_stats(engine)
    assert stats.engine == engine and stats.scrapes == 2
    for key, want in EXPECTED[engine].items():
        got = getattr(stats, key)
        if isinstance(want, dict):
            assert got is not None, key
            for q, v in want.items():
                assert got[q] == pytest.approx(v, rel=1e-9), f"{key}.{q}"
        elif want is None:
            assert got is None, key
        else:
            assert got == pytest.approx(want, rel=1e-9), key


def test_counter_rate_handles_resets_gaps_and_short_windows():
    pts = [(0.0, 100.0), (2.0, 150.0), (4.0, 20.0), (6.0, 70.0)]  # restart between 2 s and 4 s
    assert counter_increase(pts, 0.0, 6.0) == 50 + 20 + 50
    assert counter_rate(pts, 0.0, 6.0) == pytest.approx(120 / 6)
    assert counter_rate(pts, 4.0, 6.0) == 25.0
    assert counter_rate(pts, 1.0, 3.0) is None  # one scrape in the window
    assert counter_rate([(0.0, 1.0), (2.0, math.nan), (4.0, 9.0)], 0.0, 4.0) == 2.0


def test_gauge_stats_and_trend():
    pts = [(0.0, 2.0), (2.0, 4.0), (4.0, 6.0), (6.0, math.nan), (8.0, 10.0)]
    s = gauge_stats(pts, 0.0, 8.0)
    assert (s.mean, s.max, s.min, s.last, s.n) == (5.5, 10.0, 2.0, 10.0, 4)
    assert gauge_trend(pts, 0.0, 8.0) == pytest.approx(1.0)  # +2 every 2 s
    assert gauge_trend([(0.0, 3.0), (2.0, 3.0)], 0.0, 2.0) == 0.0
    assert gauge_stats(pts, 20.0, 30.0) is None and gauge_trend(pts, 0.0, 1.0) is None


def test_histogram_quantile_follows_prometheus():
    b = ((0.1, 0.0), (0.5, 10.0), (1.0, 20.0), (INF, 20.0))
    assert histogram_quantile(0.5, b) == pytest.approx(0.1 + 0.4 * 10 / 10)
    assert histogram_quantile(0.75, b) == pytest.approx(0.5 + 0.5 * 5 / 10)
    # rank in the +Inf bucket: the highest finite bound
    assert histogram_quantile(0.99, ((1.0, 5.0), (2.0, 6.0), (INF, 10.0))) == 2.0
    # first bucket: interpolated from 0 when its bound is positive...
    assert histogram_quantile(0.5, ((2.0, 10.0), (INF, 10.0))) == 1.0
    # ...and its bound when it is ≤ 0 (SGLang's queue-time le="0.0")
    assert histogram_quantile(0.5, ((0.0, 10.0), (1.0, 12.0), (INF, 12.0))) == 0.0
    assert histogram_quantile(0.5, ((1.0, 0.0), (INF, 0.0))) is None   # no observations
    assert histogram_quantile(0.5, ((1.0, 3.0), (2.0, 4.0))) is None   # no +Inf bucket
    assert histogram_quantile(1.5, b) is None
    # cumulative counts that dip (scrape of a histogram mid-update) are made monotonic
    assert histogram_quantile(0.5, ((1.0, 2.0), (2.0, 1.0), (3.0, 6.0), (INF, 8.0))) == pytest.approx(2.5)
    # bounds are sorted and duplicate bounds merged
    assert histogram_quantile(0.5, ((INF, 20.0), (1.0, 20.0), (0.5, 10.0), (0.1, 0.0))) == pytest.approx(0.5)


def test_histogram_windows_handle_resets():
    first = ((1.0, 10.0), (INF, 12.0))
    assert histogram_delta(first, ((1.0, 15.0), (INF, 20.0))) == ((1.0, 5.0), (INF, 8.0))
    assert histogram_delta(first, ((1.0, 2.0), (INF, 3.0))) == ((1.0, 2.0), (INF, 3.0))  # restarted
    assert histogram_delta(first, ((2.0, 1.0), (INF, 1.0))) == ((2.0, 1.0), (INF, 1.0))  # new bounds
    pts = [(0.0, first), (2.0, ((1.0, 15.0), (INF, 20.0)))]
    assert window_quantiles(pts, 0.0, 2.0, {"p50": 0.5}) == {"p50": pytest.approx(1.0 * 4 / 5)}
    assert window_quantiles(pts, 0.0, 1.0) is None
    assert window_quantiles([(0.0, first), (2.0, first)], 0.0, 2.0) is None  # nothing observed


def test_hit_rate_counts_a_missing_hits_counter_as_zero():
    queries = [(0.0, 100.0), (2.0, 300.0)]
    assert hit_rate([(0.0, 10.0), (2.0, 60.0)], queries, 0.0, 2.0) == 0.25
    assert hit_rate([], queries, 0.0, 2.0) == 0.0
    assert hit_rate([], [(0.0, 100.0), (2.0, 100.0)], 0.0, 2.0) is None


def test_lazily_created_series_count_from_zero():
    """SGLang creates sglang:cached_tokens_total at the first hit, and its TTFT series at the first request."""
    first = ('# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total{model_name="m"} 0\n'
             '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{model_name="m"} 0\n')
    later = first.replace("} 0\n", "} 400\n", 1) + (
        '# TYPE sglang:cached_tokens_total counter\nsglang:cached_tokens_total{model_name="m"} 100\n'
        '# TYPE sglang:time_to_first_token_seconds histogram\n'
        'sglang:time_to_first_token_seconds_bucket{le="0.2",model_name="m"} 1\n'
        'sglang:time_to_first_token_seconds_bucket{le="0.4",model_name="m"} 3\n'
        'sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4\n'
        'sglang:time_to_first_token_seconds_sum{model_name="m"} 1.4\n'
        'sglang:time_to_first_token_seconds_count{model_name="m"} 4\n')
    snaps = [(0.0, snapshot(parse_exposition(first))), (2.0, snapshot(parse_exposition(later)))]
    stats = aggregate_step(snaps, 0.0, 2.0)
    assert stats.prefix_cache_hit_rate == 0.25
    assert stats.prompt_tps == 200.0
    assert stats.ttft_ms["p50"] == pytest.approx((0.2 + 0.2 * 1 / 2) * 1000)


def test_engine_hit_rate_gauge_is_the_fallback():
    body = "# TYPE trtllm_kv_cache_hit_rate gauge\ntrtllm_kv_cache_hit_rate{{model_name=\"undefined\"}} {v}\n"
    snaps = [(t, snapshot(parse_exposition(body.format(v=v)))) for t, v in ((0.0, 0.2), (2.0, 0.4))]
    assert aggregate_step(snaps, 0.0, 2.0).prefix_cache_hit_rate == pytest.approx(0.3)


# ---------------------------------------------------------------- verdict

def test_kv_cache_verdict_on_the_vllm_fixture():
    v = server_verdict(step_stats("vllm"))
    assert v.limited_by == "kv_cache"
    assert v.reason.startswith("KV cache: usage peaked at 97 % (mean 80 %), 3 requests were preempted, "
                               "4.0 requests waited on average (+1.50/s), server queue time p95 800 ms")
    assert v.evidence["kv_usage_max"] == 0.97 and v.evidence["preemptions"] == 3.0


def test_kv_cache_verdict_from_preemptions_alone_and_from_a_full_cache_with_a_queue():
    preempted = StepServerStats(0, 10, kv_usage_max=0.7, kv_usage_mean=0.6, waiting_mean=0.0, preemptions=1)
    v = server_verdict(preempted)
    assert v.limited_by == "kv_cache" and "1 request was preempted" in v.reason
    full = StepServerStats(0, 10, kv_usage_max=0.99, kv_usage_mean=0.97, waiting_mean=2.0, preemptions=0)
    assert server_verdict(full).limited_by == "kv_cache"
    full_no_queue = StepServerStats(0, 10, kv_usage_max=0.99, kv_usage_mean=0.97, waiting_mean=0.0, preemptions=0)
    v = server_verdict(full_no_queue)  # nobody waits for the full cache yet: which way it goes needs another step
    assert v.limited_by == "not_enough_evidence" and "memory is at its edge" in v.reason
    assert "a step with more users would show whether new requests then wait for KV memory" in v.reason


@pytest.mark.parametrize(("engine", "words"), [
    ("trtllm", "queueing: 14.0 requests waited on average (+2.00/s), server queue time p95 1450 ms while the KV "
               "cache peaked at only 55 %; the running batch stayed at 64.0 on average (max 64)"),
    ("tgi", "while the KV cache peaked at only 38 %; the running batch stayed at 32.0 on average (max 32)"),
    ("llamacpp", "queueing: 4.0 requests waited on average (+1.00/s) while the server does not report KV usage; "
                 "the running batch stayed at 4.0 on average (max 4)"),
])
def test_queueing_verdict_on_fixtures(engine, words):
    v = server_verdict(step_stats(engine))
    assert v.limited_by == "queueing"
    assert words in v.reason


def test_queueing_verdict_from_a_growing_queue_alone():
    growing = StepServerStats(0, 10, kv_usage_max=0.3, waiting_mean=0.2, waiting_trend_per_s=0.1)
    assert server_verdict(growing).limited_by == "queueing"


def test_compute_verdict_compares_tpot_with_the_baseline_step():
    light = StepServerStats(0, 30, kv_usage_max=0.1, waiting_mean=0.0, running_mean=4.0, itl_ms={"p50": 19.0})
    heavy = StepServerStats(40, 70, kv_usage_max=0.42, waiting_mean=0.1, running_mean=28.0, itl_ms={"p50": 40.0})
    v = server_verdict(heavy, client={"tpot_ms": {"p50": 42.0}}, baseline=light,
                       baseline_client={"tpot_ms": {"p50": 20.0}})
    assert v.limited_by == "compute"
    assert v.reason == ("compute: the queue stayed short (0.1 waiting on average, under the 2.8 that counts as a "
                        "queue) and KV cache at most 42 %; TPOT p50 rose 2.1× (20 → 42 ms) while the running batch "
                        "went from 4.0 to 28.0 — each decode step slows as the batch grows")
    assert v.evidence["tpot_growth"] == pytest.approx(2.1)
    # without client rows the server's ITL is compared, never mixed with the client's TPOT
    v = server_verdict(heavy, baseline=light)
    assert "server ITL p50 rose 2.1× (19 → 40 ms)" in v.reason
    v = server_verdict(heavy, client={"tpot_ms": {"p50": 42.0}}, baseline=light)  # no TPOT at the lighter step
    assert v.limited_by == "not_enough_evidence"
    assert "neither the client's TPOT nor the server's ITL was measured at both steps" in v.reason
    flat = server_verdict(heavy, client={"tpot_ms": {"p50": 21.0}}, baseline=light,
                          baseline_client={"tpot_ms": {"p50": 20.0}})
    assert flat.limited_by == "not_saturated"
    assert flat.reason == ("not saturated: the queue stayed short (0.1 waiting on average, under the 2.8 that counts "
                           "as a queue) and KV cache at most 42 %; TPOT p50 moved only 1.1× (20 → 21 ms) while the "
                           "running batch went from 4.0 to 28.0 — no resource is near its limit: the server has room "
                           "for more load")


def test_one_step_or_an_unchanged_batch_is_not_enough_evidence_for_compute():
    """The real-vLLM run of 8 users that said "compute ... TPOT moved only 1.0× (84 → 84 ms) while the running
    batch went from 5.2 to 5.2": one step is its own baseline, and proves nothing."""
    step = StepServerStats(0, 30, kv_usage_max=0.04, waiting_mean=0.0, running_mean=5.2, itl_ms={"p50": 84.0})
    client = {"tpot_ms": {"p50": 84.0}}
    for baseline, baseline_client in ((None, None), (step, client)):
        v = server_verdict(step, client=client, baseline=baseline, baseline_client=baseline_client)
        assert v.limited_by == "not_enough_evidence", v
        assert v.reason == ("not enough evidence: no request waited and KV cache at most 4 %; TPOT p50 84 ms with "
                            "5.2 requests running; with no lighter step to compare with, a busy GPU and a server with "
                            "room look the same: another step with more users would separate them (its TPOT against "
                            "this one's)")
    # a lighter step whose batch was about as big: TPOT against it says nothing about a bigger batch
    same = StepServerStats(40, 70, kv_usage_max=0.05, waiting_mean=0.0, running_mean=5.9, itl_ms={"p50": 90.0})
    v = server_verdict(same, client={"tpot_ms": {"p50": 90.0}}, baseline=step, baseline_client=client)
    assert v.limited_by == "not_enough_evidence"
    assert "the running batch stayed at 5.2 → 5.9" in v.reason and "another step with more users" in v.reason
    assert "compute" not in v.reason


def test_unknown_verdict_without_server_metrics():
    assert server_verdict(None).limited_by == "unknown"
    empty = StepServerStats(0.0, 10.0, engine="vllm", scrapes=0)
    assert server_verdict(empty).reason == "unknown: no server metrics were scraped during this step"
    tokens_only = StepServerStats(0.0, 10.0, generation_tps=100.0)
    v = server_verdict(tokens_only)
    assert v.limited_by == "unknown" and "neither its queue nor its KV cache" in v.reason


def test_token_rate_warning():
    assert token_rate_warning(1040.0, 1000.0) is None
    assert token_rate_warning(None, 1000.0) is None and token_rate_warning(900.0, None) is None
    high = token_rate_warning(1250.0, 1000.0)
    assert high.startswith("server output tokens 1250.0 tok/s vs client 1000.0 tok/s (+25%, beyond ±15%)")
    assert "other traffic" in high
    low = token_rate_warning(700.0, 1000.0, what="prompt", tolerance=0.2)
    assert low.startswith("server prompt tokens 700.0 tok/s vs client 1000.0 tok/s (-30%, beyond ±20%)")
    assert "when it finishes" in low
    assert "measured none" in token_rate_warning(50.0, 0.0)
    assert token_rate_warning(0.0, 0.0) is None


def test_fixture_token_rates_check_against_a_client():
    stats = step_stats("vllm")
    assert token_rate_warning(stats.generation_tps, 2250.0) is None
    assert token_rate_warning(stats.generation_tps, 1500.0) is not None


def test_neighbouring_steps_near_the_queue_edge_do_not_flip():
    """3.5 waiting with 28 running: under the 10 % floor (2.8 → a queue), over it... the edge. After a
    queueing step the same numbers stay queueing (hysteresis); alone they are compute, and the
    sentence never says "no queue" while requests wait."""
    edge = StepServerStats(0, 30, kv_usage_max=0.4, waiting_mean=2.5, waiting_median=2.5, running_mean=28.0)
    alone = server_verdict(edge)
    assert alone.limited_by == "not_enough_evidence"
    assert "no queue" not in alone.reason and "2.5 waiting on average, under the 2.8" in alone.reason
    assert server_verdict(edge, previous="queueing").limited_by == "queueing"
    assert server_verdict(edge, previous="compute").limited_by == "not_enough_evidence"
    clear = StepServerStats(0, 30, kv_usage_max=0.4, waiting_mean=1.0, waiting_median=1.0, running_mean=28.0)
    assert server_verdict(clear, previous="queueing").limited_by == "not_enough_evidence"  # well under: it leaves
