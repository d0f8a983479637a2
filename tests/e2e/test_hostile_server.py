"""A hostile server cannot crash the client nor grow it without bound (issue 19): usage counts
no table can hold, gzip bombs on the event stream, an error body and /v1/models, a stream that
ignores max_tokens, and a request slower than --request-deadline. Both transports, one limit each.
The server is tests/support/wire_server.py (exact bytes, made as they are sent)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import tracemalloc
import urllib.request

import pandas as pd
import pytest

from llmload.metrics.record import NEVER_SENT, RequestMeta
from llmload.transport import FastTransport, OpenAITransport
from llmload.transport.stream import output_event_cap
from llmload.wire.protocol import chat_body, encode_body
from tests.support import wire_server
from tests.support.locust_runs import CHAT, LOCUST, load_rows
from tests.support.processes import ROOT, free_port

CHAT_PATH = "/v1/chat/completions"
TRANSPORTS = [FastTransport, OpenAITransport]
MIB = 1 << 20


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    log = str(tmp_path_factory.mktemp("hostile") / "wire.jsonl")
    proc, url = wire_server.start_process(log)
    for cls in TRANSPORTS:  # the SDK imports its modules on first use: not inside a measured request
        assert run((url, log), cls, "gzip").status == "ok"
    yield url, log
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


_ids = iter(range(1_000_000))


def run(wire, cls, script, max_tokens=8, **settings):
    url, _ = wire
    t = cls(url, CHAT_PATH, **{"timeout": 10, **settings})
    rid = f"{script}-{cls.__name__}-{next(_ids)}"
    try:
        rec = t.stream(encode_body(chat_body("m", [{"role": "user", "content": "hi"}], max_tokens)),
                       RequestMeta(request_id=rid, start_time=0.0, scenario="hostile", max_tokens=max_tokens),
                       headers={"X-Script": script})
    finally:
        t.close()
    return rec


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measured(fn):
    """``fn()``'s result, the Python heap's peak during it, and how much the RSS grew."""
    before = rss()
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        out = fn()
        elapsed = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, elapsed, peak, rss() - before


@pytest.mark.parametrize("script", ["gzip_bomb", "gzip_bomb_after_token"])
@pytest.mark.parametrize("cls", TRANSPORTS)
def test_a_gzip_bomb_is_a_protocol_error_within_the_deadline_in_bounded_memory(wire, cls, script):
    rec, elapsed, peak, grew = measured(lambda: run(wire, cls, script, max_event_bytes=MIB, timeout=10))
    assert rec.status == "protocol_error" and rec.content_encoding == "gzip", (rec.status, rec.error)
    assert "inflate" in rec.error and "2 x --max-event-bytes" in rec.error, rec.error
    assert rec.output_events == (1 if script == "gzip_bomb_after_token" else 0)
    assert elapsed < 5.0  # far within the 10 s deadline: it ends at the limit, not after 1 GiB
    assert peak < 16 * MIB and grew < 64 * MIB, f"heap peak {peak / MIB:.1f} MiB, RSS +{grew / MIB:.1f} MiB"


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_a_gzip_bombed_error_body_is_kept_to_64_kib(wire, cls):
    rec, elapsed, peak, grew = measured(lambda: run(wire, cls, "gzip_bomb_error"))
    assert rec.status == "http_5xx" and rec.http_status == 500
    assert rec.error.startswith('{"error":{"message":"boom yyyy') and len(rec.error) <= 500
    assert elapsed < 5.0 and peak < 16 * MIB and grew < 64 * MIB, (elapsed, peak / MIB, grew / MIB)


def test_the_openai_transports_models_list_is_read_to_64_kib_at_most(wire):
    url, _ = wire
    t = OpenAITransport(url, CHAT_PATH, timeout=10, query=(("script", "gzip_bomb_models"),))
    try:
        _, elapsed, peak, grew = measured(t.connect)  # the SDK's models.list(): a 1 GiB answer, cut
    finally:
        t.close()
    assert elapsed < 5.0 and peak < 16 * MIB and grew < 64 * MIB, (elapsed, peak / MIB, grew / MIB)


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_a_server_that_ignores_max_tokens_is_cut_off(wire, cls):
    cap = output_event_cap(8)
    rec, elapsed, peak, _ = measured(lambda: run(wire, cls, "endless_tokens", max_tokens=8))
    assert rec.status == "protocol_error", (rec.status, rec.error)
    assert rec.error == f"server ignored max_tokens: more than {cap} output events for max_tokens=8"
    # the fast transport's reader checks every 0.1 s (no work per token): what came meanwhile is bounded
    assert cap < rec.output_events < cap + 500_000 and rec.completion_tokens == rec.output_events
    assert elapsed < 10.0 and peak < 64 * MIB


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_request_deadline_caps_a_whole_request(wire, cls):
    rec = run(wire, cls, "slow_tokens", request_deadline=0.5, timeout=5)  # a token every 50 ms: never idle
    assert rec.status == "timeout" and rec.error == "the request took longer than --request-deadline 0.5 s"
    assert rec.e2e_ms == pytest.approx(500, abs=250) and 3 <= rec.output_events <= 12
    ok = run(wire, cls, "slow_tokens", request_deadline=30, timeout=5)
    assert ok.status == "ok" and ok.output_events == 40


def _live_rows(base: str) -> list[dict] | None:
    try:
        with urllib.request.urlopen(base + "/llmload/live.json", timeout=5) as r:
            assert r.status == 200
            return json.loads(r.read())["rows"]
    except OSError:
        return None  # not up yet, or already gone


def test_hostile_usage_through_a_master_and_two_workers(wire, tmp_path):
    """Every hostile count (2**64, 10**400, -1, 1.5, NaN, ±Infinity, a string) in turn with good
    streams: each hostile one is a protocol_error naming its field, and every other row still reaches
    the master; the LLM tab, llm_stats.csv and the summary all work."""
    url, log = wire
    port, web = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": ROOT}
    workers = [subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    prefix = tmp_path / "hostile"
    master = subprocess.Popen(
        [*LOCUST, "-f", CHAT, "--master", "--master-bind-port", str(port), "--expect-workers", "2", "--host", url,
         "--model", "m", "--header", "X-Script: usage_rotation", "-u", "4", "-r", "4", "-t", "6s", "--autostart",
         "--autoquit", "0", "--web-host", "127.0.0.1", "--web-port", str(web), "--csv", str(prefix),
         "--stop-timeout", "3", "--output-tokens", "8", "--input-tokens", "16", "--exit-code-on-error", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live = []
    try:
        t_end = time.monotonic() + 60
        while master.poll() is None and time.monotonic() < t_end:
            rows = _live_rows(f"http://127.0.0.1:{web}")
            if rows:
                live = rows
            time.sleep(0.5)
        out, err = master.communicate(timeout=30)
    finally:
        for p in (master, *workers):
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    # on failure, llmload's own lines first (a written-off worker says why there), then the log's tail
    said = "\n".join(line for line in (out + err).splitlines() if "llmload" in line or "LOST" in line)
    assert master.returncode == 0 and "Traceback" not in err, said[-4000:] + "\n---\n" + err[-2000:]
    worker_logs = [w.stderr.read() for w in workers]  # a worker's exit code is the run's (failures: 1)
    assert not any("Traceback" in t for t in worker_logs), [t[-2000:] for t in worker_logs]
    assert live and live[0]["scenario"] == "chat", live  # the LLM tab answered during the run
    rows = load_rows(prefix)
    assert set(rows["worker"]) == {0, 1}
    time.sleep(0.5)  # the server logs a request just after its last byte
    with open(log) as f:
        served = {e["request_id"]: e for e in map(json.loads, f) if e["script"] == "usage_rotation" and e["request_id"]}
    mine = rows[rows["request_id"].isin(served)]
    assert len(mine) == len(served) > 40, (len(mine), len(served))  # none lost on the way
    # a user stopped at the end while it reconnected never sent its request: a cancelled row, no answer
    unsent = rows[~rows["request_id"].isin(served)]
    assert len(unsent) <= 4 and (unsent["status"] == "cancelled").all() and (unsent["error"] == NEVER_SENT).all(), \
        unsent[["request_id", "status", "http_status", "error"]]
    for r in mine.itertuples():
        e = served[r.request_id]
        if "hostile_field" in e:
            assert r.status == "protocol_error", (r.status, r.error, e["hostile_value"][:20])
            assert r.error.startswith(f"usage.{e['hostile_field']}: expected a whole number 0 <= n < 2**32"), r.error
        else:
            assert r.status in ("ok", "cancelled") and (r.status == "cancelled" or r.completion_tokens == 3)
    hostile_values = {served[r]["hostile_value"] for r in mine["request_id"] if "hostile_value" in served[r]}
    assert hostile_values == set(wire_server.HOSTILE_COUNTS)
    stats = pd.read_csv(f"{prefix}_llm_stats.csv")
    assert stats.loc[0, "requests"] == len(rows)
    assert "LLM summary" in out + err
