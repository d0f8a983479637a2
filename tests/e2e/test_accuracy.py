"""Timing accuracy of a real Locust run against the mock's per-token ground truth (`--log-tokens`:
the kernel's send time of every token), at 64 and 256 streams: TTFT, and the worst stall
(`itl_max_ms`) against the server's true worst gap; and a 50 ms pause of the client shows as
coalesced reads, not as a stall of the server's.

The figures (TTFT error p99 < 1 ms, the worst stall within 2 ms for >= 99 % of requests) need a quiet
machine: benchmarks/timing_accuracy.py measures them (docs/benchmarks.md). These tests hold bounds that
a timing bug breaks and a busy neighbour does not: a TTFT taken at the wrong moment is off for every
request by a token gap or more (10-20 ms here), which moves the median; a neighbour that takes a time
slice moves a few requests, the tail. They run in the ``timing`` tier (alone, after the others).

The mock and Locust run at a raised priority where allowed (root): what is measured is the client,
and a neighbour that takes a 2-core machine's time slices delays the server's sends and the
client's reads together, which hides the server's true worst gap inside one read."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from tests.support.locust_runs import load_rows, run_locust
from tests.support.processes import ROOT, raise_priority

STALL_LOCUSTFILE = textwrap.dedent('''
    import gevent
    from gevent.monkey import get_original
    from locust import events

    from llmload import LLMUser

    real_sleep = get_original("time", "sleep")


    class ChatUser(LLMUser):
        scenario = "stall"
        input_tokens = 64
        output_tokens = 60
        ignore_eos = True


    finished = []


    @events.request.add_listener
    def pause_once(**_kw):
        # 0.3 s after the first 32 requests ended: the users started their next ones together, so
        # every stream is past its first token (at 50 ms) and far from its last (at 640 ms).
        finished.append(1)
        if len(finished) == 32:
            gevent.spawn_later(0.3, real_sleep, 0.05)  # the whole process stops for 50 ms
''')


def truth(mock, rows):
    """Per ok row: (TTFT error ms, client itl_max, true worst gap ms)."""
    log = mock.log_by_id(expect=len(rows))
    out = []
    for r in rows[rows["status"] == "ok"].itertuples():
        e = log[r.request_id]
        t = e["token_mono"]
        true_ttft = (e["first_token_mono"] - e["arrival_mono"]) * 1000
        true_max = max((b - a) * 1000 for a, b in zip(t, t[1:], strict=False))
        out.append((r.ttft_ms - true_ttft, r.itl_max_ms, true_max, r.coalesced_reads))
    return out


def measure(mock_factory, tmp_path, users, ttft_ms, itl_ms, tokens, seconds) -> list[tuple]:
    mock = mock_factory("--profile", "fixed", "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms), "--log-tokens")
    raise_priority(mock.proc.pid)
    tmp_path.mkdir(exist_ok=True)
    prefix = tmp_path / "acc"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url, "-u", str(users),
                      "-r", str(users), "--csv", str(prefix), "--headless", "-t", f"{seconds}s", "--stop-timeout", "10",
                      "--ignore-eos", "--output-tokens", str(tokens), "--input-tokens", "64"], tmp_path, boosted=True)
    assert res.returncode == 0, res.stderr[-3000:]
    got = truth(mock, load_rows(prefix))
    assert len(got) >= users
    # every ok row streamed many tokens, so every row has a worst stall: a NaN is a bug, not a pass
    missing = sum(1 for g in got if g[1] != g[1])
    assert missing == 0, f"{missing} of {len(got)} ok rows have no itl_max_ms"
    # never a stall the server did not have, in any run: a client that counts its own pause as the
    # server's reports whole gaps more. Half a gap, not the quiet figure (within 2 ms for every request,
    # benchmarks/timing_accuracy.py): a client descheduled between two single-token reads sees that
    # gap longer by the time it was off (3.1 ms once at 256 streams beside a busy loop).
    assert all(g[1] <= g[2] + itl_ms / 2 for g in got), max(g[1] - g[2] for g in got)
    return got


# Bounds only a bug breaks (the quiet-machine figures are 1 ms and 99 %: benchmarks/timing_accuracy.py)
TTFT_MEDIAN_MS = 1.0   # |error| at the median: a systematic error of the client's moves every request
TTFT_P99_MS = 30.0     # |error| at p99: a neighbour's time slices reach ~10-20 ms, a lost token a whole gap
STALL_SHARE = 0.5      # the share of requests whose worst stall is within 2 ms of the server's (99 % quiet)


@pytest.mark.timing
@pytest.mark.parametrize("users,ttft_ms,itl_ms,tokens,seconds", [(64, 50, 10, 50, 6), (256, 200, 20, 100, 8)])
def test_ttft_and_worst_stall_against_the_servers_send_times(mock_factory, tmp_path, users, ttft_ms, itl_ms, tokens,
                                                             seconds):
    # A second run when the first misses: a neighbour that stalls the server and the client at
    # once hides the server's worst gap inside one read (the client cannot know it, and says it
    # does not); an error of the client's own shows in both runs.
    failures = []
    for attempt in range(2):
        got = measure(mock_factory, tmp_path / f"run{attempt}", users, ttft_ms, itl_ms, tokens, seconds)
        ttft_err = np.array([g[0] for g in got])
        stall_err = np.array([abs(g[1] - g[2]) for g in got])
        median, p99 = np.percentile(np.abs(ttft_err), [50, 99])
        within = (stall_err <= 2.0).mean()
        assert ttft_err.min() > -0.5  # never shorter than the truth: the client reads after the server sent
        if median < TTFT_MEDIAN_MS and p99 < TTFT_P99_MS and within >= STALL_SHARE:
            return
        failures.append(f"TTFT |error| p50 {median:.2f} ms, p99 {p99:.2f} ms (error p50, p99, max "
                        f"{np.percentile(ttft_err, [50, 99, 100])}); itl_max within 2 ms for {within:.1%} (error "
                        f"p50, p99, max {np.percentile(stall_err, [50, 99, 100])})")
    pytest.fail("; then ".join(failures))


def test_a_client_pause_is_counted_as_coalesced_reads_not_as_a_server_stall(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "50", "--itl-ms", "10", "--log-tokens")
    locustfile = tmp_path / "stall.py"
    locustfile.write_text(STALL_LOCUSTFILE)
    prefix = tmp_path / "stall"
    res = run_locust(["-f", str(locustfile), "--host", mock.url, "-u", "32", "-r", "32", "--csv", str(prefix),
                      "--headless", "-t", "5s", "--stop-timeout", "10"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    got = truth(mock, rows)
    paused = [g for g in got if g[3] > 0]
    assert len(paused) >= 24  # most of the 32 streams in flight during the pause read several tokens at once
    # the pause (50 ms, five tokens' worth) is never reported as a stall: the worst gap stays the server's,
    # give or take half a gap (as in measure)
    assert all(g[1] <= g[2] + 5.0 for g in got if g[1] == g[1]), max(g[1] - g[2] for g in got if g[1] == g[1])
    assert "read(s) carried several tokens at once" in res.stdout
