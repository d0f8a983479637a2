"""The scraping loop (llmload.server_metrics.scrape) against tiny real endpoints on 127.0.0.1: bounded in
time and size, one warning per endpoint, the target host probed at the known paths; and the
options' checks (one line, exit code 1)."""

from __future__ import annotations

import csv
import logging
import time

import gevent
import pytest

from llmload.server_metrics import MAX_EXPOSITION_BYTES
from llmload.server_metrics.fetch import ScrapeError, fetch
from llmload.server_metrics.scrape import ServerMetricsScraper, candidate_urls
from tests.support.locust_runs import CHAT, LOCUST, llmload_lines, run
from tests.support.metric_scrapes import scrapes
from tests.support.metrics_endpoints import dead_endpoint, dripping_endpoint, static_endpoint

VLLM_A, VLLM_B = (body.encode() for _, body in scrapes("vllm"))


def ticking() -> tuple[list[float], gevent.Greenlet]:
    """A greenlet that notes the time every 10 ms: gaps show a blocked event loop."""
    ticks: list[float] = []

    def tick() -> None:
        while True:
            ticks.append(time.perf_counter())
            gevent.sleep(0.01)
    return ticks, gevent.spawn(tick)


def max_gap(ticks: list[float]) -> float:
    """The longest the loop went without turning (infinite when it never turned twice)."""
    return max((b - a for a, b in zip(ticks, ticks[1:], strict=False)), default=float("inf"))


def test_fetch_reads_a_body_and_names_what_went_wrong():
    with static_endpoint({"/metrics": VLLM_A}) as ep:
        assert fetch(ep.url + "/metrics", 2.0) == VLLM_A
        assert ep.hits[0][1].startswith("llmload-server-metrics (pid ")
        with pytest.raises(ScrapeError, match="HTTP 404"):
            fetch(ep.url + "/nope", 2.0)
    with pytest.raises(ScrapeError, match="cannot connect"):
        fetch(ep.url + "/metrics", 2.0)  # the server is gone: connection refused


def test_a_dead_endpoint_costs_the_timeout_and_never_blocks_the_loop():
    ticks, ticker = ticking()
    with dead_endpoint() as url:
        t0 = time.monotonic()
        with pytest.raises(ScrapeError, match="no complete answer within 0.5 s|timed out"):
            fetch(url, 0.5)
        took = time.monotonic() - t0
    ticker.kill()
    assert 0.45 <= took < 1.5
    assert len(ticks) >= 30 and max_gap(ticks) < 0.2


def test_a_huge_body_is_cut_at_the_cap_or_refused_from_its_length():
    ticks, ticker = ticking()
    cut = f"over the {MAX_EXPOSITION_BYTES}-byte cap.*stopped reading"
    with dripping_endpoint(total=10 << 20, pause_s=0.01) as ep, pytest.raises(ScrapeError, match=cut):
        fetch(ep.url, 10.0)
    ticker.kill()
    assert max_gap(ticks) < 0.2
    with dripping_endpoint(total=10 << 20, content_length=True) as ep:
        t0 = time.monotonic()
        with pytest.raises(ScrapeError, match="10485760 bytes \\(Content-Length\\), over the .* cap.*not read"):
            fetch(ep.url, 10.0)
        assert time.monotonic() - t0 < 1.0
    late = "no complete answer within 1 s|timed out"
    with dripping_endpoint(total=10 << 20, pause_s=0.2) as ep, pytest.raises(ScrapeError, match=late):
        fetch(ep.url, 1.0)  # 1.3 MB/s: the time runs out first


def test_a_fleet_with_a_dead_replica_warns_once_and_writes_every_scrape(tmp_path, caplog):
    path = tmp_path / "x_server_metrics.csv"
    with static_endpoint({"/metrics": VLLM_A}) as good, dead_endpoint() as dead:
        scraper = ServerMetricsScraper([good.url + "/metrics", dead], interval_s=0.3, csv_path=str(path))
        with caplog.at_level(logging.INFO, logger="llmload"):
            for _ in range(3):
                scraper.tick(time.time())
            scraper.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(f"llmload: server metrics from {dead}: ")
    assert "without repeating this warning" in warnings[0]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    up = [(r["endpoint"], r["value"]) for r in rows if r["metric"] == "up"]
    assert sorted(up) == sorted([(good.url + "/metrics", "1")] * 3 + [(dead, "0")] * 3)
    assert {r["metric"] for r in rows} >= {"requests_running", "kv_cache_usage", "server_ttft_seconds_bucket",
                                           "requests_finished", "scrape_duration_seconds"}
    assert scraper.scrapes == 6 and scraper.failures == 3 and scraper.engines[good.url + "/metrics"] == "vllm"
    last = scraper.samples[-1]
    assert last["running"] == 46 and last["endpoints_up"] == 1 and last["endpoints"] == 2
    assert any("server metrics: 6 scrape(s)" in r.getMessage() for r in caplog.records)


def big_body(size: int) -> bytes:
    """Copies of a vLLM scrape with distinct engine labels: ``size`` bytes of real series."""
    one = VLLM_B.decode()
    parts, k = [], 0
    while sum(map(len, parts)) + len(one) < size:
        parts.append(one.replace('engine="0"', f'engine="{2 * k}"').replace('engine="1"', f'engine="{2 * k + 1}"'))
        k += 1
    return "".join(parts).encode()


def test_the_loop_scrapes_every_interval():
    """Six scrapes 0.2 s apart take 1.0 s: never less (it keeps its interval), and not three times as
    long (it scrapes every interval). Counted to six rather than over a fixed 1.1 s: beside a busy
    loop this process got 4 scrapes into 1.1 s of wall time."""
    with static_endpoint({"/metrics": VLLM_B}) as ep:
        scraper = ServerMetricsScraper([ep.url + "/metrics"], interval_s=0.2)
        t0 = time.monotonic()
        scraper.start()
        while len(ep.hits) < 6 and time.monotonic() - t0 < 10.0:
            gevent.sleep(0.01)
        took = time.monotonic() - t0
        scraper.stop()
    assert len(ep.hits) >= 6 and 5 * 0.2 - 0.05 <= took < 3.0, (len(ep.hits), took)
    assert scraper.failures == 0 and len(scraper.samples) == len(ep.hits)


def test_parsing_a_big_body_leaves_the_event_loop_free():
    """The parser is pure Python (≈ 0.2 s per MiB here): it runs in a pool thread, which gives the
    loop the interpreter back every few ms, instead of stopping every user's stream meanwhile."""
    body = big_body(MAX_EXPOSITION_BYTES - 100_000)
    with static_endpoint({"/metrics": body}) as ep:
        scraper = ServerMetricsScraper([ep.url + "/metrics"], interval_s=5.0)
        ticks, ticker = ticking()
        t0 = time.perf_counter()
        scraper.tick(time.time())
        took = time.perf_counter() - t0
        ticker.kill()
    assert scraper.failures == 0 and scraper.samples[-1]["running"] > 1000
    assert took > 0.15, took  # long enough that blocking the loop would show
    assert max_gap(ticks) < took / 2, (max_gap(ticks), took)


def test_without_urls_the_target_host_is_probed_at_the_known_paths(caplog):
    trtllm = scrapes("trtllm")[0][1].encode()
    routes = {"/metrics": b'[{"iter": 1, "numActiveRequests": 3}]', "/prometheus/metrics": trtllm}
    with static_endpoint(routes) as ep, caplog.at_level(logging.INFO, logger="llmload"):
        assert candidate_urls(ep.url + "/v1") == [ep.url + "/metrics", ep.url + "/prometheus/metrics"]
        scraper = ServerMetricsScraper([], interval_s=0.2, host=ep.url + "/v1")
        scraper.start()
        gevent.sleep(0.5)
        scraper.stop()
    assert scraper.urls == [ep.url + "/prometheus/metrics"] and scraper.engines[scraper.urls[0]] == "trtllm"
    assert any("reading server metrics from" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_host_without_metrics_is_said_once_and_left_alone(caplog):
    with static_endpoint({}) as ep, caplog.at_level(logging.INFO, logger="llmload"):
        scraper = ServerMetricsScraper([], interval_s=0.2, host=ep.url)
        scraper.start()
        gevent.sleep(0.6)
        assert not scraper.running
        scraper.stop()
    assert len(ep.hits) == 2  # /metrics and /prometheus/metrics, once each
    said = [r.getMessage() for r in caplog.records if "no server metrics on the target host" in r.getMessage()]
    assert len(said) == 1 and "HTTP 404" in said[0] and "--no-server-metrics" in said[0]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("args,message", [
    (["--server-metrics", "gpu-box:8000/metrics"], "--server-metrics 'gpu-box:8000/metrics': expected the http:// "
                                                   "or https:// URL of a Prometheus metrics endpoint"),
    (["--server-metrics", "http://gpu:99999/metrics"], "--server-metrics 'http://gpu:99999/metrics': expected"),
    (["--server-metrics", "http://gpu/metrics", "--no-server-metrics"], "--no-server-metrics and --server-metrics "
                                                                        "URL: pass one or the other"),
    (["--server-metrics-interval", "0"], "--server-metrics-interval '0': expected seconds > 0"),
], ids=["no scheme", "bad port", "both", "zero interval"])
def test_bad_server_metrics_options_fail_once_at_init(tmp_path, args, message):
    res = run([*LOCUST, "-f", CHAT, "--host", "http://127.0.0.1:9", "--headless", "-u", "1", "-t", "2s", *args],
              tmp_path)
    assert res.returncode == 1, res.stderr[-2000:]
    lines = llmload_lines(res)
    assert len(lines) == 1 and message in lines[0], lines
    assert "Traceback" not in res.stderr
