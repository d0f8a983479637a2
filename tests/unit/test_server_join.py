"""The server's delta and the client's rows over the same requests (report/server_join.py), and
how coarse an interpolated server percentile is. Hand-made rows and scrapes; the right numbers
are worked out by hand in each test."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from llmload.report import ReportOptions, build_report, parse_slo
from llmload.report.server_join import client_between, gaps, join_rows
from llmload.server_metrics import map_samples, parse_exposition
from llmload.server_metrics.series import csv_rows
from llmload.server_metrics.window import histogram_bounds, histogram_quantile
from tests.support.report_rows import req, write_csv

URL = "http://127.0.0.1:8000/metrics"
BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def vllm_exposition(ttfts: list[float], e2es: list[float], running: float = 8.0) -> str:
    """A vLLM V1 exposition whose TTFT and E2E histograms hold exactly these observations (s)."""
    lines = []
    for name, values in (("time_to_first_token_seconds", ttfts), ("e2e_request_latency_seconds", e2es)):
        lines.append(f"# TYPE vllm:{name} histogram")
        for le in (*BOUNDS, float("inf")):
            n = sum(1 for v in values if v <= le)
            le_text = "+Inf" if le == float("inf") else repr(le)
            lines.append(f'vllm:{name}_bucket{{engine="0",le="{le_text}",model_name="tiny"}} {n}')
        lines.append(f'vllm:{name}_sum{{engine="0",model_name="tiny"}} {sum(values)!r}')
        lines.append(f'vllm:{name}_count{{engine="0",model_name="tiny"}} {len(values)}')
    labels = '{engine="0",model_name="tiny"}'
    lines += ["# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{labels} {running}",
              "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{labels} 0.0",
              "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{labels} 0.04"]
    return "\n".join(lines) + "\n"


def write_scrapes(prefix: str, scrape_times: list[float], requests: list[dict], server_lag_s: float) -> None:
    """Scrapes at these times of a server that saw each request ``server_lag_s`` after the client sent
    it and sent its first token (and its end) ``server_lag_s`` before the client read it."""
    rows = []
    for t in scrape_times:
        first = [r["ttft_ms"] / 1000 - 2 * server_lag_s for r in requests
                 if r["start_time"] + r["ttft_ms"] / 1000 - server_lag_s <= t]
        ended = [r["e2e_ms"] / 1000 - 2 * server_lag_s for r in requests
                 if r["start_time"] + r["e2e_ms"] / 1000 - server_lag_s <= t]
        body = vllm_exposition(first, ended)
        rows += csv_rows(t, URL, map_samples(parse_exposition(body), "vllm"), engine="vllm", duration_s=0.004)
    with open(f"{prefix}_server_metrics.csv", "w") as f:
        f.write("time,endpoint,metric,labels,value\n")
        for r in rows:
            labels = str(r[3]).replace('"', '""')
            f.write(f'{r[0]},{r[1]},{r[2]},"{labels}",{r[4]}\n')


def burst_run(tmp_path):
    """One step of 8 users from t = 1000 s. Its first 8 requests queue behind each other and get their
    first token after 8 s (t = 1008, inside the measured window from 1005, but they started in the
    warm-up); then 100-ms TTFTs started every 0.25 s from 1005 to 1029.75. Scrapes every 10 s from 1006.
    The server sees each request 5 ms after the client sends it and sends its first token 5 ms before
    the client reads it: its TTFT is the client's minus 10 ms, request for request."""
    burst = [req(1000.0 + i * 0.01, 8, ttft=8000.0, e2e=9000.0) for i in range(8)]
    steady = [req(1005.0 + i * 0.25, 8, ttft=100.0, e2e=600.0) for i in range(100)]
    prefix = write_csv(tmp_path / "burst_requests.csv", burst + steady)
    write_scrapes(prefix, [1006.0, 1016.0, 1026.0], burst + steady, server_lag_s=0.005)
    return prefix, burst, steady


def test_the_server_and_the_client_count_the_same_requests(tmp_path):
    """Before: the client's side was the requests that started in the step's window (the 100 steady
    ones, mean 100 ms) and the server's the TTFTs it observed between the scrapes (the burst's 8 s among
    them): the gap came out about −600 ms, which no request can have. Now both sides are the requests
    whose first token came between 1006 and 1026: the 8 of the burst and the steady ones from 1006 to
    1025.75 (their first token by 1025.85): 4 × 20 = 80 of them; the gap is the 10 ms of every request."""
    prefix, burst, steady = burst_run(tmp_path)
    report = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=20000")]))
    (step,) = report.overall.steps
    sv = step.data["server"]
    in_window = [r for r in burst + steady if 1006.0 < r["start_time"] + r["ttft_ms"] / 1000 <= 1026.0]
    assert len(in_window) == 8 + 80
    # straddling the first edge (1006 s + 4 ms): the burst's 8 and the steady one started at 1006.0;
    # the last: the one started at 1026.0, first token at 1026.1
    assert sv["ttft_requests"] == {"server": 88, "client": 88, "straddling": {"first": 9, "last": 1}}
    client_mean = float(np.mean([r["ttft_ms"] for r in in_window]))
    assert sv["client_ttft_ms"]["mean"] == pytest.approx(client_mean)
    assert sv["ttft_ms"]["mean"] == pytest.approx(client_mean - 10.0)
    assert sv["ttft_gap_ms"]["mean"] == pytest.approx(10.0)
    # the old selection, the requests that started in the measured window, gives an impossible gap
    old = step.data["ttft_ms"]["mean"]
    assert old == pytest.approx(100.0)
    assert old - sv["ttft_ms"]["mean"] < -500.0
    # E2E: the requests that ended between the scrapes, the burst's (at 1009) among them
    ended = [r for r in burst + steady if 1006.0 < r["start_time"] + r["e2e_ms"] / 1000 <= 1026.0]
    # ends straddling 1006: the burst's 8 and the steady ones started at 1005.5, 1005.75 and 1006.0;
    # 1026: those started at 1025.5, 1025.75 and 1026.0 (600-ms requests)
    assert sv["e2e_requests"] == {"server": len(ended), "client": len(ended), "straddling": {"first": 11, "last": 3}}
    assert sv["e2e_gap_ms"]["mean"] == pytest.approx(10.0)
    assert sv["window"] == {"from": 1006.0, "to": 1026.0, "resolution_ms": 4.0}
    # the interpolated p95 says which bucket it lies in: the burst's 8 s are 9 % of 88, so p95 is among them
    assert sv["ttft_bounds_ms"]["p95"] == [5000.0, 10000.0]
    assert sv["ttft_bounds_ms"]["p50"] == [50.0, 100.0]
    text = json.dumps(report.to_json())  # the bounds are plain JSON
    assert '"ttft_bounds_ms"' in text


def test_a_client_that_reads_late_counts_fewer_and_the_straddling_requests_say_how_many(tmp_path):
    """A busy client reads every first token 150 ms after the engine sent it (and the engine got each
    request 150 ms after the client's start): its TTFT is 400 ms, the server's 100 ms. Eight requests
    start together at 1025.7, just before the last scrape at 1026: the engine sends their first tokens at 1025.95,
    inside its delta; the client reads them at 1026.1, after it. So the server counts 8 more than the
    client (the old check allowed 2), and those 8 are among the ones ``straddling.last`` names: the 8,
    and the steady ones started at 1025.75 and 1026.0."""
    steady = [req(1005.0 + i * 0.25, 8, ttft=400.0, e2e=900.0) for i in range(100)]
    joining = [req(1025.7 + i * 0.0001, 8, ttft=400.0, e2e=900.0) for i in range(8)]
    prefix = write_csv(tmp_path / "late_requests.csv", steady + joining)
    write_scrapes(prefix, [1006.0, 1016.0, 1026.0], steady + joining, server_lag_s=0.15)
    report = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=20000")]))
    sv = report.overall.steps[0].data["server"]
    counts = sv["ttft_requests"]
    # the client: first tokens read in (1016, 1026], starts in (1015.6, 1025.6]: 1015.75 … 1025.5, 40;
    # the engine: sent in the window, starts in (1015.75, 1025.75]: 1016.0 … 1025.75 and the 8, 48
    assert sv["window"] == {"from": 1016.0, "to": 1026.0, "resolution_ms": 4.0}  # the warm-up left 1006 out
    assert (counts["client"], counts["server"]) == (40, 48)
    assert counts["straddling"] == {"first": 2, "last": 10}  # first: those started at 1015.75 and 1016.0
    assert counts["client"] - counts["straddling"]["first"] <= counts["server"]
    assert counts["server"] <= counts["client"] + counts["straddling"]["last"]


def test_the_rendered_table_shows_the_counts_and_the_bucket(tmp_path):
    from llmload.report.sections.server import server_table

    prefix, _, _ = burst_run(tmp_path)
    report = build_report(prefix, ReportOptions(slos=[parse_slo("ttft_p95_ms=20000")]))
    _, text, header, rows = server_table(report)
    row = dict(zip(header, rows[0], strict=True))
    assert row["TTFT requests server/client"] == "88 / 88"
    assert row["TTFT mean server/client (gap)"].endswith("(10.0)")
    assert "[5000–10000]" in row["TTFT p95 server [bucket]/client"].replace(",", "")
    assert any("between the step's first and last scrape" in t for t in text)


def test_client_between_picks_first_tokens_and_ends():
    rows = join_rows(pd.DataFrame({
        "start_time": [0.0, 1.0, 2.0, 3.0], "ttft_ms": [500.0, 500.0, np.nan, 500.0],
        "e2e_ms": [900.0, 1500.0, 100.0, 300.0], "status": ["ok", "ok", "http_5xx", "cancelled"]}))
    ttft = client_between(rows, 0.5, 3.0, "ttft")  # first tokens at 0.5 (edge: out), 1.5 (in), 3.5 (out)
    assert ttft.n == 1 and ttft.mean == 500.0
    assert (ttft.straddle_first, ttft.straddle_last) == (0, 0)  # started at 3.0: after the last edge
    wide = client_between(rows, 0.5, 3.0, "ttft", resolution_s=0.6)  # started at 1.0: the engine may have
    assert (wide.straddle_first, wide.straddle_last) == (1, 1)     # answered the first scrape at 1.1
    e2e = client_between(rows, 0.5, 3.0, "e2e")  # ends at 0.9 and 2.5 (ok); the 5xx and the cancel are left out
    assert e2e.n == 2 and e2e.mean == pytest.approx(1200.0)
    assert client_between(rows, 10.0, 20.0, "ttft").n == 0
    assert gaps(client_between(rows, 10.0, 20.0, "ttft"), 400.0, None) is None
    assert gaps(ttft, 480.0, {"p50": 470.0, "p95": None}) == {"mean": 20.0, "p50": 30.0}
    with pytest.raises(ValueError, match="expected 'ttft' or 'e2e'"):
        client_between(rows, 0.0, 1.0, "tpot")


def test_a_percentile_says_the_bucket_it_was_interpolated_in():
    buckets = ((0.1, 10.0), (0.5, 90.0), (1.0, 99.0), (float("inf"), 100.0))
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * 40 / 80)
    assert histogram_bounds(0.5, buckets) == (0.1, 0.5)
    assert histogram_bounds(0.05, buckets) == (0.0, 0.1)  # the first bucket starts at 0 for a positive bound
    assert histogram_bounds(0.995, buckets) == (1.0, float("inf"))  # in +Inf: the answer (1.0) is a lower bound
    assert histogram_bounds(0.5, ((0.1, 0.0), (float("inf"), 0.0))) is None
