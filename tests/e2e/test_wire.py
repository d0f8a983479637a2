"""Hostile and odd wires: a local server sends exact bytes (tests/support/wire_server.py), both transports
must give the record the metric definitions say, within bounded memory and time."""

from __future__ import annotations

import subprocess
import time
import tracemalloc

import gevent
import pytest
from gevent.monkey import get_original

from llmload.metrics.record import RequestMeta
from llmload.transport import FastTransport, OpenAITransport
from llmload.wire.protocol import chat_body, encode_body
from llmload.wire.sse import SSEDecoder, SSEError
from tests.support import wire_server

CHAT = "/v1/chat/completions"
real_sleep = get_original("time", "sleep")  # time.sleep is gevent's (the tests run monkey-patched)
TRANSPORTS = [FastTransport, OpenAITransport]


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    log = str(tmp_path_factory.mktemp("wire") / "wire.jsonl")
    proc, url = wire_server.start_process(log)
    yield url, log
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


_ids = iter(range(1_000_000))


def run(wire, cls, script, **settings):
    url, log = wire
    t = cls(url, CHAT, **{"timeout": 10, **settings})
    rid = f"{script}-{cls.__name__}-{next(_ids)}"
    try:
        rec = t.stream(encode_body(chat_body("m", [{"role": "user", "content": "hi"}], 8)),
                       RequestMeta(request_id=rid, start_time=0.0, scenario="wire"),
                       headers={"X-Script": script})
    finally:
        t.close()
    return rec, rid


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_keepalive_comments_do_not_hold_off_the_first_token_deadline(wire, cls):
    t0 = time.monotonic()
    rec, _ = run(wire, cls, "keepalive_no_token", first_token_timeout=0.5, timeout=5)
    assert rec.status == "timeout" and "no first token within 0.5 s" in rec.error, rec.error
    assert time.monotonic() - t0 > 0.45  # never before its deadline
    # the comments kept coming every 0.1 s for 1.5 s: on the request's own clock it ended at its deadline,
    # not at their end (the wall clock around it also counts building the SDK's client: 1.44 s on a busy machine)
    assert rec.e2e_ms == pytest.approx(500, abs=250)


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_comments_after_tokens_do_not_hold_off_the_idle_deadline(wire, cls):
    rec, _ = run(wire, cls, "keepalive_after_tokens", timeout=0.4)
    assert rec.status == "timeout" and "no output event for 0.4 s" in rec.error, rec.error
    assert rec.output_events == 2


def test_a_line_that_never_ends_is_a_protocol_error_in_bounded_memory(wire):
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        rec, _ = run(wire, FastTransport, "endless_line", max_event_bytes=1 << 20)
        elapsed = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rec.status == "protocol_error" and "over 1048576 bytes" in rec.error, rec.error
    assert peak < 6 * (1 << 20), f"peak {peak / 2**20:.1f} MiB for a 1 MiB limit"
    assert elapsed < 5.0  # it ends once the limit is passed, not after 64 MiB


def test_sse_parse_cost_is_linear_in_the_line_length():
    """Feeding a line that has no end yet must cost the same per read whether 64 KiB or 60 MiB of
    it came before (re-joining it on every read made that quadratic: 4 MiB took 54 ms of the loop)."""
    piece = b"x" * 65536
    d = SSEDecoder(max_bytes=1 << 30)
    d.feed(b"data: {")
    costs = []
    for _ in range(1024):  # 64 MiB
        t = time.perf_counter()
        d.feed(piece)
        costs.append(time.perf_counter() - t)
    early, late = sorted(costs[:128])[64], sorted(costs[-128:])[64]  # medians: one pause cannot decide
    assert late < 4 * early + 20e-6, f"a read cost {early * 1e6:.1f} µs early, {late * 1e6:.1f} µs at 60 MiB"
    t = time.perf_counter()
    assert d.feed(b"}\n\n") == [b"{" + piece * 1024 + b"}"]  # one pass over the line when it ends
    assert time.perf_counter() - t < 2.0
    with pytest.raises(SSEError, match="over 1024 bytes"):
        d = SSEDecoder(max_bytes=1024)
        for _ in range(20):
            d.feed(b"y" * 100)


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_an_error_body_is_kept_to_64_kib(wire, cls):
    t0 = time.monotonic()
    rec, _ = run(wire, cls, "huge_error")
    assert rec.status == "http_5xx" and rec.http_status == 500
    assert len(rec.error) <= 500 and rec.error.startswith('{"error":{"message":"boom')
    assert time.monotonic() - t0 < 3.0  # it stops reading after 64 KiB (the SDK too: transport/sdk_bodies.py)


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_events_after_done_are_ignored(wire, cls):
    rec, _ = run(wire, cls, "after_done")
    assert rec.status == "ok" and rec.output_events == 2 and rec.completion_tokens == 3
    assert rec.e2e_ms < 250  # the late event came 300 ms after [DONE]


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_an_event_name_read_apart_from_its_data_does_not_leak(wire, cls):
    rec, _ = run(wire, cls, "event_split")
    assert rec.status == "ok" and rec.output_events == 2 and rec.finish_reason == "stop"


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_usage_before_choices_and_several_choices(wire, cls):
    rec, _ = run(wire, cls, "usage_first")
    assert rec.status == "ok" and rec.token_source == "usage" and rec.completion_tokens == 2
    assert rec.prompt_tokens == 7 and rec.output_events == 2
    rec, _ = run(wire, cls, "two_choices")
    assert rec.status == "ok" and rec.output_events == 2 and rec.finish_reason == "stop"
    assert rec.token_source == "chunks" and rec.completion_tokens == 2


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_a_request_counts_its_responses_bytes_for_locusts_size_column(wire, cls):
    # Locust's "Average size (bytes)" of the LLM row held output tokens (issue 32, item 9): bytes now,
    # the body as received (the fast transport reads the chunked framing too; httpx hands it over without)
    (_, body), = wire_server.SCRIPTS["usage_first"]
    rec, _ = run(wire, cls, "usage_first")
    framed = len(body) - len(wire_server.HEAD)
    events = sum(int(line, 16) for line in body[len(wire_server.HEAD):].split(b"\r\n")[0::2] if line)
    assert rec.response_bytes == (framed if cls is FastTransport else events), (rec.response_bytes, framed, events)
    assert rec.response_bytes > 10 * rec.completion_tokens
    assert rec.clock_stamped is (cls is OpenAITransport)  # the fast transport reads the kernel's stamps


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_chunk_extensions_after_the_first_token(wire, cls):
    rec, _ = run(wire, cls, "chunk_ext")
    assert rec.status == "ok" and rec.output_events == 3 and rec.finish_reason == "stop"


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_cr_line_ends_and_empty_data_lines(wire, cls):
    rec, _ = run(wire, cls, "cr_lines")
    assert rec.status == "ok" and rec.output_events == 2 and rec.finish_reason == "stop", rec.error


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_a_redirect_has_its_own_status(wire, cls):
    rec, _ = run(wire, cls, "redirect")
    assert rec.status == "http_3xx" and rec.http_status == 307
    assert "https://elsewhere.example/v1/chat/completions" in rec.error and "does not follow" in rec.error


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_a_200_with_a_json_body_is_a_protocol_error_with_its_message(wire, cls):
    rec, _ = run(wire, cls, "json_200")
    assert rec.status == "protocol_error" and rec.http_status == 200
    assert "expected an event stream, got application/json" in rec.error
    assert "streaming is disabled on this gateway" in rec.error


@pytest.mark.parametrize("cls", TRANSPORTS)
def test_identity_is_asked_for_and_gzip_is_decoded_anyway(wire, cls):
    rec, rid = run(wire, cls, "gzip")
    assert rec.status == "ok" and rec.output_events == 3 and rec.completion_tokens == 3
    assert rec.content_encoding == "gzip"
    entry = wire_server.read_log(wire[1], rid)
    assert entry["headers"]["accept-encoding"] == "identity"


def test_events_read_together_share_a_timestamp_and_hide_their_gaps(wire):
    """The server writes 10 tokens 20 ms apart; the client's loop is stalled for 150 ms meanwhile.
    The events waiting in the socket are read together and stamped with one time (the kernel's
    receive time of the newest bytes): the stall must show as coalesced reads, never as a stall of
    the server's."""
    url, log = wire
    t = FastTransport(url, CHAT, timeout=10)
    t.connect()
    result = {}

    def stream():
        result["rec"] = t.stream(encode_body(chat_body("m", [{"role": "user", "content": "hi"}], 8)),
                                 RequestMeta(request_id="stalled", start_time=0.0, scenario="wire"),
                                 headers={"X-Script": "paced_20ms"})

    g = gevent.spawn(stream)
    gevent.sleep(0.05)
    real_sleep(0.15)  # the whole process (its event loop) stops: nothing reads the socket
    g.join(5)
    t.close()
    rec = result["rec"]
    sends = wire_server.read_log(log, "stalled")["sends"][1:11]  # the 10 content events
    true_gaps = [(b - a) * 1000 for a, b in zip(sends, sends[1:], strict=False)]
    assert rec.status == "ok" and rec.output_events == 10
    assert rec.coalesced_reads >= 1  # several events came out of one read
    assert len(rec.itl_ms) < 9  # the gaps that read hid are left out
    assert rec.itl_max_ms is None or rec.itl_max_ms <= max(true_gaps) + 5, (rec.itl_max_ms, true_gaps)
