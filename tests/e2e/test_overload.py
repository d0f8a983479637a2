"""An overloaded or absent server: users back off after 429/503/unreachable (Retry-After when
given), the run says the server failed it rather than blaming the client, a preflight probe ends
or waits, and the OS's limits (open files, ephemeral ports) are named when a run meets them."""

from __future__ import annotations

import errno
import os
import random
import re
import resource
import subprocess
import time
from email.utils import formatdate

import pytest

from llmload.metrics.record import CSV_COLUMNS
from llmload.metrics.scenario_stats import ScenarioStats
from llmload.metrics.stats import LLMStats
from llmload.net.limits import explain_connect_error
from llmload.plugin.output.end_of_run import end_of_run_text
from llmload.plugin.output.live import LiveHistory, LiveWindow
from llmload.plugin.users.backoff import Backoff, BackoffPolicy, retry_after_seconds
from tests.support.locust_runs import CHAT, LOCUST, load_rows, run_locust
from tests.support.processes import ROOT, free_port, start_mock, stop_mock

# -- the policy (pure) -------------------------------------------------------------------------------


def test_retry_after_seconds_and_http_dates():
    now = 1_700_000_000.0
    assert retry_after_seconds("2", now) == 2.0 and retry_after_seconds(" 0.5 ", now) == 0.5
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now) == pytest.approx(30.0, abs=1.0)
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now) == 0.0  # already past: go now
    assert retry_after_seconds("", now) is None and retry_after_seconds("soon", now) is None
    assert retry_after_seconds("inf", now) is None


def test_backoff_doubles_with_jitter_up_to_the_cap_and_resets_on_success():
    b = Backoff(BackoffPolicy(base_s=0.5, max_s=4.0), random.Random(1))
    waits = [b.after("http_5xx", 503, "", 0.0) for _ in range(6)]
    for n, w in enumerate(waits):
        ceiling = min(4.0, 0.5 * 2**n)
        assert ceiling / 2 <= w <= ceiling, (n, w)
    assert b.after("ok", 200, "", 0.0) == 0.0 and b.failures == 0
    assert 0.25 <= b.after("connect_error", None, "", 0.0) <= 0.5  # refused: the same backoff, from the start
    assert b.after("rate_limited", 429, "3", 0.0) == 3.0  # Retry-After wins
    assert b.after("rate_limited", 429, "3600", 0.0) == 4.0  # ... up to the cap
    assert b.after("http_5xx", 500, "", 0.0) == 0.0  # a 500 is an answer, not a request to slow down
    off = Backoff(BackoffPolicy(enabled=False), random.Random(1))
    assert off.after("rate_limited", 429, "3", 0.0) == 0.0
    with pytest.raises(ValueError, match="--backoff-base-s 9 is above --backoff-max-s 1"):
        BackoffPolicy(base_s=9, max_s=1)


def _row(status: str, t: float, backoff: float | None = None) -> tuple:
    d = dict.fromkeys(CSV_COLUMNS)
    d.update(request_id="r", start_time=t, scenario="chat", status=status, e2e_ms=1.0, users=2, worker=0,
             backoff_ms=backoff)
    return tuple(d[c] for c in CSV_COLUMNS)


def test_when_errors_dominate_they_come_first_and_the_client_is_not_blamed():
    live, history, stats = LiveWindow(), LiveHistory(), LLMStats()
    stats.scenarios["chat"] = ScenarioStats()
    for i in range(40):
        live.add_row(_row("connect_error", 1001.0 + i * 0.1, backoff=500.0))
        stats.scenarios["chat"].add_row(_row("connect_error", 1001.0 + i * 0.1, backoff=500.0))
    starved = [{"worker": 0, "cpu": 101.0, "lag_p90_ms": 50.0, "lag_p99_ms": 80.0, "lag_max_ms": 90.0,
                "limited": True}]
    rows = history.sample(live, 1012.0, 1.0, users=2, in_flight={}, health=starved)
    assert rows[-1]["errors_dominate"] and rows[-1]["backoff_s"] == 20.0
    assert not rows[-1]["client_limited"] and history.limited_intervals == []
    assert history.error_intervals == ["40 of 40 failed (connect_error 40)"]
    text = end_of_run_text(stats.rows(), {}, history, "", 2.0, [], None)
    assert text.splitlines()[0].startswith("SERVER ERRORS: 40 of 40 finished requests failed (connect_error 40)")
    assert "CLIENT-LIMITED" not in text and "client: not judged" in text and "backoff: users waited 20.0 s" in text


def test_connect_errors_name_the_limit_that_was_hit():
    assert "open-files limit is" in explain_connect_error(OSError(errno.EMFILE, "Too many open files"))
    text = explain_connect_error(OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"))
    assert text.startswith("ephemeral ports exhausted") and "ip_local_port_range" in text
    assert explain_connect_error(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")) == \
        "[Errno 111] Connection refused"


# -- real runs ----------------------------------------------------------------------------------------


def test_429_with_retry_after_holds_the_request_rate_to_what_it_allows(mock_factory, tmp_path):
    """Every request gets 429 with Retry-After: 1: 4 users can send ~4 requests/s, not thousands."""
    mock = mock_factory("--profile", "fixed", "--fault", "429=1.0", "--retry-after", "1")
    prefix = tmp_path / "rl"
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "4", "-r", "4", "-t", "5s",
                      "--csv", str(prefix)], tmp_path)
    rows = load_rows(prefix)
    limited = rows[rows["status"] == "rate_limited"]
    assert (limited["backoff_ms"] == 1000.0).all() and len(limited) >= 4
    # 4 users × (1 request per Retry-After second) over 5 s: at most 4 × 6 requests.
    assert len(mock.log()) <= 24, len(mock.log())
    assert "backoff: users waited" in res.stdout and res.stdout.count("SERVER ERRORS: ") == 1
    # Off, the same run is a hot loop: the difference is what backoff buys.
    res_off = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "4", "-r", "4", "-t", "2s",
                          "--backoff", "off"], tmp_path)
    assert res_off.returncode == 1
    assert len(mock.log()) - len(rows) > 200


def test_503_without_retry_after_backs_off_exponentially(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--fault", "503=1.0")
    prefix = tmp_path / "u"
    run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "1", "-r", "1", "-t", "5s", "--csv", str(prefix),
                "--backoff-base-s", "0.4", "--backoff-max-s", "10"], tmp_path)
    rows = load_rows(prefix).sort_values("start_time")
    waits = rows["backoff_ms"].tolist()
    # The n-th failure in a row waits half to all of 0.4 s × 2ⁿ⁻¹: 0.4, 0.8, 1.6, 3.2 s ... in 5 s.
    assert 3 <= len(waits) <= 6, waits
    for n, w in enumerate(waits):
        assert 200.0 * 2**n <= w <= 400.0 * 2**n, (n, waits)


def test_nothing_listening_one_message_at_preflight(tmp_path):
    port = free_port()
    res = run_locust(["-f", CHAT, "--host", f"http://127.0.0.1:{port}", "--headless", "-u", "2", "-t", "5s",
                      "--csv", str(tmp_path / "x")], tmp_path)
    assert res.returncode == 1
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("llmload: ")]
    assert lines == [f"llmload: cannot reach the server at http://127.0.0.1:{port} (GET http://127.0.0.1:{port}"
                     "/v1/models: Connection refused); is it up, and is --host right? (--preflight wait waits for "
                     "it, --preflight off skips this check)"]
    assert not os.path.exists(tmp_path / "x_requests.csv")


def test_nothing_listening_without_preflight_is_no_hot_loop_and_no_client_blame(tmp_path):
    """Tried as a new user would: 2 users, 5 s, a port where nothing listens (was: 23,685 rows at
    101 % CPU and `CLIENT-LIMITED … add worker processes`)."""
    prefix = tmp_path / "dead"
    res = run_locust(["-f", CHAT, "--host", f"http://127.0.0.1:{free_port()}", "--headless", "-u", "2", "-r", "2",
                      "-t", "5s", "--csv", str(prefix), "--preflight", "off"], tmp_path)
    rows = load_rows(prefix)
    assert set(rows["status"]) == {"connect_error"} and len(rows) <= 2 * 6
    assert (rows["start_time"] > 1.7e9).all()  # a request that was never sent has its time too (was 0)
    summary = res.stdout[res.stdout.index("SERVER ERRORS"):]
    assert summary.startswith("SERVER ERRORS: ") and "connect_error" in summary.splitlines()[0]
    assert "CLIENT-LIMITED" not in res.stdout


def test_preflight_wait_starts_once_the_server_answers(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": ROOT}
    prefix = tmp_path / "late"
    proc = subprocess.Popen([*LOCUST, "-f", CHAT, "--host", f"http://127.0.0.1:{port}", "--headless", "-u", "2",
                             "-r", "2", "-t", "3s", "--csv", str(prefix), "--preflight", "wait",
                             "--preflight-wait-s", "60", "--output-tokens", "10"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(3)
        assert proc.poll() is None  # still waiting
        mock = start_mock(tmp_path, "--profile", "fixed", "--ttft-ms", "5", "--itl-ms", "1", "--port", str(port))
        try:
            out, _ = proc.communicate(timeout=60)
        finally:
            stop_mock(mock)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r"does not answer \(Connection refused\); waiting up to 60 s", out)
    assert (load_rows(prefix)["status"] == "ok").sum() >= 2




def test_too_few_open_files_for_the_users_is_named_once(fixed_mock, tmp_path):
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

    env = {**os.environ, "PYTHONPATH": ROOT}
    res = subprocess.run([*LOCUST, "-f", CHAT, "--host", fixed_mock.url, "--headless", "-u", "300", "-r", "300",
                          "-t", "3s", "--output-tokens", "10"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120, preexec_fn=low_limit)
    out = res.stdout + res.stderr
    named = [line for line in out.splitlines() if "open-files limit is 200 (hard limit 200)" in line]
    assert named and "users in this process need about" in named[0], out[-3000:]
    assert "ulimit -n 65536" in named[0]
