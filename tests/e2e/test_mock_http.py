"""A live `llmload mock` over real sockets: the wire format, routes, faults, disconnects."""

from __future__ import annotations

import http.client
import itertools
import json
import re
import socket
import time

import pytest

from tests.support.mock_client import chat, post, sse_events


def test_chat_stream_wire_format_is_vllms(fixed_mock):
    status, headers, data = post(fixed_mock, "/v1/chat/completions", chat(), {"X-Request-Id": "wire-1"})
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["transfer-encoding"] == "chunked"
    events = sse_events(data)
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    objs = [json.loads(e[6:]) for e in events[:-1]]
    # role-only delta first, then one token per chunk, finish_reason on the last content chunk
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert objs[0]["id"] == "chatcmpl-wire-1" and objs[0]["object"] == "chat.completion.chunk"
    contents = [o["choices"][0]["delta"] for o in objs[1:4]]
    assert all(set(d) == {"content"} and re.fullmatch(r" [a-z]+", d["content"]) for d in contents)
    assert [o["choices"][0]["finish_reason"] for o in objs[1:4]] == [None, None, "length"]
    usage = objs[4]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3,
                              "prompt_tokens_details": {"cached_tokens": 0}}
    assert len(objs) == 5


def test_usage_chunk_only_when_asked_and_completions_shape(fixed_mock):
    _, _, data = post(fixed_mock, "/v1/chat/completions", chat(stream_options=None))
    events = sse_events(data)
    assert events[-1] == "data: [DONE]" and all('"usage"' not in e for e in events)
    body = {"model": "m", "prompt": "once upon a time", "max_tokens": 2, "stream": True,
            "stream_options": {"include_usage": True}, "ignore_eos": True}
    _, _, data = post(fixed_mock, "/v1/completions", body)
    objs = [json.loads(e[6:]) for e in sse_events(data)[:-1]]
    assert objs[0]["object"] == "text_completion" and "text" in objs[0]["choices"][0]
    assert objs[1]["choices"][0]["finish_reason"] == "length"
    assert objs[2]["usage"]["prompt_tokens"] == 4


def test_non_streaming_and_max_completion_tokens(fixed_mock):
    status, _, data = post(fixed_mock, "/v1/chat/completions",
                           {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 4,
                            "ignore_eos": True})
    obj = json.loads(data)
    assert status == 200 and obj["object"] == "chat.completion"
    assert obj["usage"]["completion_tokens"] == 4 and len(obj["choices"][0]["message"]["content"].split()) == 4
    assert obj["choices"][0]["finish_reason"] == "length"


def test_output_length_without_ignore_eos_is_drawn_and_capped(mock_factory):
    m = mock_factory("--profile", "fixed", "--ttft-ms", "1", "--itl-ms", "0", "--output-mean-tokens", "20")
    lengths = []
    for _ in range(12):
        _, _, data = post(m, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                       "max_tokens": 30, "min_tokens": 5, "stream": False})
        lengths.append(json.loads(data)["usage"]["completion_tokens"])
    assert all(5 <= n <= 30 for n in lengths) and len(set(lengths)) > 2


def test_simple_routes_and_errors(fixed_mock):
    conn = http.client.HTTPConnection("127.0.0.1", fixed_mock.port, timeout=10)
    conn.request("GET", "/health")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.read() == b""
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", fixed_mock.port, timeout=10)
    conn.request("GET", "/v1/models")
    models = json.loads(conn.getresponse().read())
    assert models["data"][0]["id"] == "mock-fixed"
    conn.request("GET", "/nope")
    resp = conn.getresponse()
    assert resp.status == 404 and "error" in json.loads(resp.read())
    conn.close()
    status, _, data = post(fixed_mock, "/v1/chat/completions", {"messages": "not a list"})
    assert status == 400 and "messages" in json.loads(data)["error"]["message"]


def test_context_length_error_is_vllm_like(mock_factory):
    m = mock_factory("--profile", "llama3-70b-2xa100", "--max-model-len", "100")
    status, _, data = post(m, "/v1/chat/completions", chat(max_tokens=200))
    assert status == 400 and "maximum context length is 100" in json.loads(data)["error"]["message"]


@pytest.mark.parametrize("code", ["429", "500", "503"])
def test_http_faults_have_openai_error_bodies(fixed_mock, code):
    status, _, data = post(fixed_mock, "/v1/chat/completions", chat(), {"X-Mock-Fault": code})
    err = json.loads(data)["error"]
    assert status == int(code) and err["code"] == int(code) and err["message"]


def test_stream_faults_on_the_wire(fixed_mock):
    _, _, data = post(fixed_mock, "/v1/chat/completions", chat(max_tokens=6), {"X-Mock-Fault": "stream_error:2"})
    events = sse_events(data)
    assert '"error"' in events[-2] and events[-1] == "data: [DONE]"
    assert sum('"content":" ' in e for e in events) == 2
    _, _, data = post(fixed_mock, "/v1/chat/completions", chat(max_tokens=4), {"X-Mock-Fault": "malformed:1"})
    bad = [e for e in sse_events(data) if e.startswith('data: {"id":"broken"')]
    assert len(bad) == 1
    with pytest.raises(http.client.IncompleteRead):
        post(fixed_mock, "/v1/chat/completions", chat(max_tokens=10), {"X-Mock-Fault": "disconnect:3"})
    t = time.monotonic()
    post(fixed_mock, "/v1/chat/completions", chat(max_tokens=2), {"X-Mock-Fault": "slow_first:0.3"})
    assert time.monotonic() - t >= 0.3
    status, _, _ = post(fixed_mock, "/v1/chat/completions", chat(), {"X-Mock-Fault": "bogus"})
    assert status == 400
    outcomes = [e["outcome"] for e in fixed_mock.log(expect=5)]
    assert outcomes[:3] == ["fault:stream_error", "completed", "fault:disconnect"]


def test_fault_rates_by_flag(mock_factory):
    m = mock_factory("--profile", "fixed", "--ttft-ms", "1", "--itl-ms", "0", "--fault", "429=0.5", "--seed", "3")
    statuses = [post(m, "/v1/chat/completions", chat(max_tokens=1))[0] for _ in range(40)]
    assert 8 <= statuses.count(429) <= 32 and statuses.count(200) + statuses.count(429) == 40


def test_a_client_that_hangs_up_frees_its_slot_at_once(mock_factory):
    m = mock_factory("--profile", "llama3-70b-2xa100", "--max-num-seqs", "1")
    s = socket.create_connection(("127.0.0.1", m.port))
    body = json.dumps(chat(max_tokens=5000)).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone\r\nContent-Length: %d\r\n\r\n%s"
              % (len(body), body))
    s.recv(100)  # the response head: the request is in the engine now
    time.sleep(0.3)
    s.close()
    t = time.monotonic()
    status, _, _ = post(m, "/v1/chat/completions", chat(max_tokens=2))  # needs the only slot
    assert status == 200 and time.monotonic() - t < 2.0
    log = {e["request_id"]: e for e in m.log(expect=2)}
    assert log["gone"]["outcome"] == "disconnected"


def test_metrics_use_vllm_names(mock_factory):
    m = mock_factory("--profile", "llama3-70b-2xa100")
    system = " ".join(f"w{i}" for i in range(400))
    for q in ("a", "b"):
        post(m, "/v1/chat/completions", {"messages": [{"role": "system", "content": system},
                                                       {"role": "user", "content": q}], "max_tokens": 2,
                                          "stream": True, "ignore_eos": True})
    conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_preemptions_total",
                 "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_count",
                 "vllm:request_queue_time_seconds_sum", "vllm:e2e_request_latency_seconds_bucket"):
        assert name in text, name
    hits = float(re.search(r'vllm:prefix_cache_hits_total\{[^}]*\} (\S+)', text).group(1))
    assert hits == 400  # the second request reuses the 25 whole blocks of the shared system prompt
    assert re.search(r'vllm:generation_tokens_total\{[^}]*\} 4\b', text)


def test_list_profiles_and_bad_flags():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "llmload.cli", "mock", "--list-profiles"], capture_output=True,
                         text=True, check=True).stdout
    assert "qwen2.5-3b-a800" in out and "fixed" in out
    bad = subprocess.run([sys.executable, "-m", "llmload.cli", "mock", "--profile", "nope"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "unknown mock profile 'nope'" in bad.stderr
    bad = subprocess.run([sys.executable, "-m", "llmload.cli", "mock", "--fault", "429=7"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "RATE must be a probability" in bad.stderr


def test_ctrl_c_ends_the_server_cleanly(fixed_mock):
    import signal

    fixed_mock.proc.send_signal(signal.SIGINT)
    assert fixed_mock.proc.wait(10) == 0
    assert "stopped" in fixed_mock.proc.stdout.read()


def test_responses_api_stream_and_answer(fixed_mock):
    body = {"model": "m", "input": [{"role": "user", "content": "say three words"}], "max_output_tokens": 3,
            "stream": True, "ignore_eos": True}
    status, headers, data = post(fixed_mock, "/v1/responses", body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    lines = [ln for ln in data.decode().split("\n") if ln.startswith("event: ")]
    kinds = [ln[7:] for ln in lines]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds.count("response.output_text.delta") == 3 and kinds[-1] == "response.completed"
    completed = json.loads(sse_events(data)[-1].split("data: ", 1)[1])
    assert completed["response"]["usage"]["output_tokens"] == 3 and completed["response"]["usage"]["input_tokens"] == 3
    assert b"[DONE]" not in data
    status, _, data = post(fixed_mock, "/v1/responses", {**body, "stream": False})
    answer = json.loads(data)
    assert status == 200 and answer["status"] == "completed" and answer["usage"]["output_tokens"] == 3


def test_log_tokens_gives_each_tokens_send_time(mock_factory):
    m = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "5", "--log-tokens")
    post(m, "/v1/chat/completions", chat(max_tokens=12), {"X-Request-Id": "streamed"})
    post(m, "/v1/chat/completions", chat(max_tokens=3, stream=False), {"X-Request-Id": "whole"})
    log = m.log_by_id(expect=2)
    times = log["streamed"]["token_mono"]
    assert len(times) == 12 == log["streamed"]["tokens_sent"]
    assert times[0] == log["streamed"]["first_token_mono"] and times[-1] == log["streamed"]["last_token_mono"]
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(times)]
    assert all(g >= 0 for g in gaps) and 4.0 <= sum(gaps) / len(gaps) <= 15.0
    assert times[0] - log["streamed"]["arrival_mono"] >= 0.029
    assert log["whole"]["token_mono"] is None  # no stream, no per-token times


def test_log_tokens_needs_a_log():
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "llmload.cli", "mock", "--log-tokens"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--log-tokens needs --log FILE" in bad.stderr
