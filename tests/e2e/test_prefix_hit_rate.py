"""Prefix-cache truth (issue 23) in real Locust runs against `llmload mock`: `prefix_hit_rate: 0.6`
makes the server's cached share 0.6 within 5 points while the mock's KV cache holds the prefixes;
with a KV cache too small for them the share falls short, and the summary and the report say so."""

from __future__ import annotations

import json

from llmload.report import ReportOptions, build_report, write_report
from tests.support.locust_runs import run_scenario

INTENDED = """
seed: 6
workloads:
  rag:
    input_tokens: 200
    output_tokens: 8
    ignore_eos: true
    prefix_hit_rate: 0.6
    prefix: {groups: [{name: docs, count: 8, popularity: uniform}]}
"""
FAST = ("--step-base-ms", "5", "--step-per-seq-ms", "0", "--step-per-prefill-token-ms", "0",
        "--step-per-context-token-ms", "0", "--api-overhead-ms", "0")


def cached_share(rows) -> float:
    ok = rows[rows["status"] == "ok"]
    return float(ok["cached_tokens"].sum()) / float(ok["prompt_tokens"].sum())


def test_the_intended_share_is_what_the_server_caches_when_the_cache_holds_the_prefixes(mock_factory, tmp_path):
    mock = mock_factory(*FAST)  # the default engine: prefix caching on, a KV cache far larger than 8 prefixes
    rows, out, prefix = run_scenario(tmp_path, mock, INTENDED, "hits", "-u", "4", "-r", "4", "-t", "6s",
                                     "--stop-timeout", "10")
    assert len(rows) >= 150
    assert (rows["prompt_tokens"] == 304 + 200).all()  # the prefix 0.6/0.4 x 200 in 16-token blocks, then 200
    assert abs(cached_share(rows) - 0.6) <= 0.05, cached_share(rows)
    assert "0.600 intended (prefix_hit_rate)" in out and "points apart" not in out
    report = build_report(str(prefix), ReportOptions(warmup_s=0))
    assert not [w for w in report.warnings if "intended" in w]


def test_a_kv_cache_too_small_for_the_prefixes_shows_the_shortfall(mock_factory, tmp_path):
    mock = mock_factory(*FAST, "--kv-capacity-tokens", "1200")  # room for about two prompts' blocks
    rows, out, prefix = run_scenario(tmp_path, mock, INTENDED, "evicted", "-u", "2", "-r", "2", "-t", "6s",
                                     "--stop-timeout", "10")
    assert len(rows) >= 50 and cached_share(rows) < 0.45, cached_share(rows)
    assert "0.600 intended (prefix_hit_rate): WARNING" in out and "points apart" in out
    report = build_report(str(prefix), ReportOptions(warmup_s=0))
    said = [w for w in report.warnings if "intended (prefix_hit_rate)" in w]
    assert len(said) == 1 and said[0].startswith("rag: the server reported") and "too small" in said[0]
    write_report(report, str(tmp_path / "rep"))
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["scenarios"]["rag"]["prefix_cache"]["intended_hit_ratio"] == 0.6
    assert data["prefix_cache"]["hit_ratio_tokens"] < 0.45 and any("intended" in w for w in data["warnings"])


def test_primed_prefixes_and_a_warm_up_leave_no_first_use_in_the_measured_rows(mock_factory, tmp_path):
    mock = mock_factory(*FAST)
    primed = INTENDED.replace("prefix: {groups:", "prefix: {prime: true, groups:")
    rows, out, prefix = run_scenario(tmp_path, mock, primed, "primed", "-u", "4", "-r", "4", "-t", "4s",
                                     "--stop-timeout", "10", "--warmup-seconds", "2", "--warmup-users", "4")
    warm = rows[rows["phase"] == "warmup"]
    measured = rows[rows["phase"] != "warmup"]
    assert len(warm) >= 8 and len(measured) >= 50
    # the process's first 8 picks were the 8 prefixes, once each, in the warm-up: 8 misses, a few more
    # only where a prefix was drawn again while its first request was still in prefill
    assert 8 <= (warm["cached_tokens"] == 0).sum() <= 12
    assert (measured["cached_tokens"] == 304).all()  # every measured prompt found its whole prefix cached
    assert abs(cached_share(measured) - 304 / 504) < 1e-9
