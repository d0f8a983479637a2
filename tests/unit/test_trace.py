"""Trace replay: the four formats on the shipped samples, every malformed-input message, the
replay options, the split across workers, and prompt blocks from Mooncake hash ids."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from datetime import datetime

import pytest

from llmload.workload.text import WORDS
from llmload.workload.trace.hash_blocks import block_seed, block_text, prompt_from_hash_ids
from llmload.workload.trace.read import (
    TraceError,
    TraceRequest,
    load_trace,
    loop_period,
    parse_trace,
    select,
    split_for_worker,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "scenarios", "data", "traces")


def sample(name: str) -> str:
    return os.path.join(DATA, name)


def write(tmp_path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8", newline="")
    return str(p)


WHOLE = "expected a whole number >= 0"


def mc(ts, n_in=600, n_out=10, ids=(0, 1)) -> str:
    return json.dumps({"timestamp": ts, "input_length": n_in, "output_length": n_out, "hash_ids": list(ids)})


# ---- the shipped samples ------------------------------------------------------------------------

def test_mooncake_sample():
    tr = load_trace(sample("mooncake_sample.jsonl"))
    assert tr.format == "mooncake" and tr.notes == []
    reqs = tr.requests
    assert len(reqs) == 200
    assert reqs[0] == TraceRequest(0.0, 1044, 335, (0, 10, 11))
    assert reqs[-1].t == pytest.approx(59.778) and reqs[-1].hash_ids == (0, 140, 141, 142, 693)
    assert all(a.t <= b.t for a, b in zip(reqs, reqs[1:], strict=False))
    # as in the real trace: a block per 512 tokens, and most prompts open with shared blocks
    assert all(len(r.hash_ids) == math.ceil(r.input_tokens / 512) for r in reqs)
    assert sum(r.hash_ids[0] == 0 for r in reqs) > 100
    assert sum(r.hash_ids[:3] == (1, 2, 3) for r in reqs) > 50
    with open(sample("mooncake_sample.jsonl")) as f:
        raw = [json.loads(line) for line in f]
    assert [r.t for r in reqs] == [row["timestamp"] / 1000 for row in raw]  # milliseconds


def test_azure_sample():
    tr = load_trace(sample("azure_code_sample.csv"))
    assert tr.format == "azure" and tr.notes == []
    reqs = tr.requests
    assert len(reqs) == 150
    assert (reqs[0].t, reqs[0].input_tokens, reqs[0].output_tokens) == (0.0, 2275, 13)
    with open(sample("azure_code_sample.csv"), newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]
    # the published file's shape: CRLF line ends, seven fractional digits, no newline at the end
    with open(sample("azure_code_sample.csv"), "rb") as f:
        assert f.read().count(b"\r\n") == 150
    # last time computed another way: strptime on the first six fractional digits
    first, last = (datetime.strptime(r[0][:26], "%Y-%m-%d %H:%M:%S.%f") for r in (rows[1], rows[-1]))
    assert reqs[-1].t == (last - first).total_seconds()
    assert (reqs[-1].input_tokens, reqs[-1].output_tokens) == (int(rows[-1][1]), int(rows[-1][2]))


def test_burstgpt_sample_and_filters():
    path = sample("burstgpt_sample.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    tr = load_trace(path)
    assert tr.format == "burstgpt"
    failed = sum(r["Response tokens"] == "0" for r in rows)
    assert failed == 9 and len(tr.requests) == 180 - 9
    assert tr.notes == [f"{path}: skipped 9 requests with 0 output tokens (failed requests in BurstGPT); "
                        "keep_zero_output keeps them"]
    assert tr.requests[0] == TraceRequest(0.0, 1289, 195)   # Timestamp 5 becomes t = 0
    assert tr.requests[-1].t == 210.0
    assert len(load_trace(path, keep_zero_output=True).requests) == 180
    gpt4 = load_trace(path, models=["GPT-4"]).requests
    assert len(gpt4) == sum(r["Model"] == "GPT-4" and r["Response tokens"] != "0" for r in rows) == 31
    api = load_trace(path, log_types=["API log"], keep_zero_output=True).requests
    assert len(api) == sum(r["Log Type"] == "API log" for r in rows)
    both = load_trace(path, models=["ChatGPT"], log_types=["Conversation log"]).requests
    assert len(both) == sum(r["Model"] == "ChatGPT" and r["Log Type"] == "Conversation log"
                            and r["Response tokens"] != "0" for r in rows)
    with pytest.raises(TraceError, match=r"no row matches Model in \['gpt4'\] \(other values in the file: "
                                         r"Model: ChatGPT, GPT-4\)"):
        load_trace(path, models=["gpt4"])


def test_plain_sample():
    tr = load_trace(sample("plain_sample.jsonl"))
    assert tr.format == "plain" and len(tr.requests) == 60
    assert tr.requests[0] == TraceRequest(0.0, 1526, 97, (), "s5", "docs-a")
    assert tr.requests[-1].t == pytest.approx(52.974)
    assert {r.prefix_id for r in tr.requests} == {"", "docs-a", "docs-b"}


# ---- malformed input: one message naming file, line, key ----------------------------------------

def test_mooncake_bad_line_names_file_and_line(tmp_path):
    lines = [mc(i * 100) for i in range(16)]
    lines.append('{"timestamp": 1700, "input_length": "abc", "output_length": 3, "hash_ids": [0]}')
    p = write(tmp_path, "x.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(e.value) == f'{p}:17: input_length: expected a whole number >= 0, got "abc"'


@pytest.mark.parametrize("line,message", [
    ('{"timestamp": 5, "input_length": -1, "output_length": 3}', f"input_length: {WHOLE}, got -1"),
    ('{"timestamp": 5, "input_length": 2.5, "output_length": 3}', f"input_length: {WHOLE}, got 2.5"),
    ('{"timestamp": 5, "input_length": true, "output_length": 3}', f"input_length: {WHOLE}, got true"),
    ('{"timestamp": 5, "input_length": 7}', "output_length: missing"),
    ('{"input_length": 7, "output_length": 3}', "timestamp: missing (milliseconds from the trace start)"),
    ('{"timestamp": "soon", "input_length": 7, "output_length": 3}',
     'timestamp: expected milliseconds >= 0, got "soon"'),
    ('{"timestamp": -4, "input_length": 7, "output_length": 3}', "timestamp: expected milliseconds >= 0, got -4"),
    ('{"timestamp": 5, "input_length": 7, "output_length": 3, "hash_ids": [1, "2"]}',
     'hash_ids[1]: expected a whole number >= 0, got "2"'),
    ('{"timestamp": 5, "input_length": 7, "output_length": 3, "hash_ids": 4}',
     "hash_ids: expected a list of whole numbers >= 0, got 4"),
    ('{"timestamp": 5, "input_length": 7, "output_length": 3, "session_id": [1]}',
     "session_id: expected a string, got [1]"),
    ('{"timestamp": 5, "input_length": 7,', "not valid JSON: "),
    ('[1, 2]', "expected a JSON object, got list"),
])
def test_mooncake_errors(tmp_path, line, message):
    p = write(tmp_path, "m.jsonl", mc(0) + "\n\n" + line + "\n")
    with pytest.raises(TraceError) as e:
        load_trace(p, fmt="mooncake")
    assert str(e.value).startswith(f"{p}:3: {message}")


@pytest.mark.parametrize("row,message", [
    ("2023-11-16 18:17:04,abc,3", 'ContextTokens: expected a whole number >= 0, got "abc"'),
    ("2023-11-16 18:17:04,12,-3", 'GeneratedTokens: expected a whole number >= 0, got "-3"'),
    ("16/11/2023 18:17,12,3",
     'TIMESTAMP: expected a date and time like 2023-11-16 18:17:03.9799600, got "16/11/2023 18:17"'),
    ("2023-11-16 18:17:04,12", "expected 3 columns, got 2: '2023-11-16 18:17:04,12'"),
])
def test_azure_errors(tmp_path, row, message):
    p = write(tmp_path, "a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,5,5\r\n"
              + row + "\r\n")
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(e.value) == f"{p}:3: {message}"


def test_azure_2024_offsets_and_missing_fraction(tmp_path):
    p = write(tmp_path, "a24.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
              "2024-05-12 00:00:00+00:00,1452,3\n2024-05-12 00:00:00.041683+00:00,584,3\n"
              "2024-05-12 00:00:01.5+00:00,862,38\n")
    assert [r.t for r in load_trace(p).requests] == [0.0, 0.041683, 1.5]


def test_csv_header_errors(tmp_path):
    p = write(tmp_path, "h.csv", "TIMESTAMP,ContextTokens,Tokens\n2023-11-16 18:17:04,1,2\n")
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(e.value) == (f"{p}:1: header: missing column GeneratedTokens (an Azure LLM inference trace needs "
                            "TIMESTAMP, ContextTokens, GeneratedTokens); got TIMESTAMP, ContextTokens, Tokens")
    p = write(tmp_path, "u.csv", "when,prompt,reply\n1,2,3\n")
    with pytest.raises(TraceError, match=r"u.csv:1: cannot tell the trace format from the header 'when,prompt,reply'"):
        load_trace(p)
    p = write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens\n1,2,3\n")
    with pytest.raises(TraceError, match=r"b.csv: header: no Model column to filter on"):
        load_trace(p, models=["GPT-4"])
    with pytest.raises(TraceError, match="filter BurstGPT traces only; this is a mooncake trace"):
        load_trace(sample("mooncake_sample.jsonl"), models=["GPT-4"])


@pytest.mark.parametrize("row,message", [
    ("x,ChatGPT,10,5,15,API log", 'Timestamp: expected seconds >= 0, got "x"'),
    ("7,ChatGPT,10,-5,5,API log", 'Response tokens: expected a whole number >= 0, got "-5"'),
    ("7,ChatGPT,ten,5,15,API log", 'Request tokens: expected a whole number >= 0, got "ten"'),
])
def test_burstgpt_errors(tmp_path, row, message):
    p = write(tmp_path, "b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
              "5,ChatGPT,472,18,490,Conversation log\n" + row + "\n")
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(e.value) == f"{p}:3: {message}"


def test_burstgpt_newer_columns_keep_session(tmp_path):
    p = write(tmp_path, "b3.csv", "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,"
              "Total tokens,Log Type\n10.5,abc,3.2,GPT-4,100,20,120,Conversation log\n"
              "12,,1.0,ChatGPT,50,5,55,API log\n")
    reqs = load_trace(p).requests
    assert reqs == [TraceRequest(0.0, 100, 20, (), "abc"), TraceRequest(1.5, 50, 5)]


@pytest.mark.parametrize("line,message", [
    ('{"t": 1, "input_tokens": 5, "output_tokens": 5, "input_token": 5}',
     "input_token: unknown key; expected t, input_tokens, output_tokens, prefix_id, session_id, hash_ids"),
    ('{"input_tokens": 5, "output_tokens": 5}', "t: missing (seconds from the trace start)"),
    ('{"t": "1s", "input_tokens": 5, "output_tokens": 5}', 't: expected seconds >= 0, got "1s"'),
    ('{"t": 1, "input_tokens": 5, "output_tokens": 5, "prefix_id": null}', "prefix_id: expected a string, got null"),
])
def test_plain_errors(tmp_path, line, message):
    p = write(tmp_path, "p.jsonl", '{"t": 0, "input_tokens": 5, "output_tokens": 5}\n' + line + "\n")
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert str(e.value) == f"{p}:2: {message}"


def test_empty_files(tmp_path):
    empties = (("e.jsonl", "", "empty trace: no header and no requests"),
               ("b.jsonl", "\n  \n\r\n", "empty trace: no header and no requests"),
               ("h.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "no requests in the trace"))
    for name, text, message in empties:
        p = write(tmp_path, name, text)
        with pytest.raises(TraceError) as e:
            load_trace(p)
        assert str(e.value) == f"{p}: {message}"
    p = write(tmp_path, "z.jsonl", mc(0, n_out=0) + "\n" + mc(5, n_out=0) + "\n")
    with pytest.raises(TraceError, match=r"no requests in the trace \(every row had 0 output tokens\)"):
        load_trace(p)
    with pytest.raises(TraceError, match="cannot read the trace: No such file or directory"):
        load_trace(str(tmp_path / "missing.jsonl"))
    p = write(tmp_path, "bin.jsonl", b'{"t": 0, "input_tokens": 5, "output_tokens": 5}\n\xff\xfe\x00\n')
    with pytest.raises(TraceError, match="not UTF-8 text"):
        load_trace(p)


def test_bom_crlf_and_blank_lines(tmp_path):
    body = "\r\n".join([mc(0), "", mc(1500), mc(3000)]) + "\r\n"
    p = write(tmp_path, "bom.jsonl", b"\xef\xbb\xbf" + body.encode())
    tr = load_trace(p)
    assert tr.format == "mooncake" and [r.t for r in tr.requests] == [0.0, 1.5, 3.0]
    p = write(tmp_path, "bom.csv", b"\xef\xbb\xbfTimestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
              b"\r\n5,ChatGPT,472,18,490,Conversation log\r\n\r\n45,GPT-4,10,2,12,API log\r\n")
    assert load_trace(p).requests == [TraceRequest(0.0, 472, 18), TraceRequest(40.0, 10, 2)]


def test_unsorted_rows_are_sorted_stably_with_a_note(tmp_path):
    lines = [mc(1000, n_in=1), mc(3000, n_in=2), mc(2000, n_in=3), mc(500, n_in=4), mc(2000, n_in=5)]
    p = write(tmp_path, "u.jsonl", "\n".join(lines) + "\n")
    tr = load_trace(p)
    assert [(r.t, r.input_tokens) for r in tr.requests] == [(0.0, 4), (0.5, 1), (1.5, 3), (1.5, 5), (2.5, 2)]
    assert tr.notes == [f"{p}: 3 rows out of time order (first at line 3); sorted by time, "
                        "equal times kept in file order"]


def test_zero_output_rows(tmp_path):
    p = write(tmp_path, "z.jsonl", "\n".join([mc(0), mc(10, n_out=0), mc(20)]) + "\n")
    assert [r.t for r in load_trace(p).requests] == [0.0, 0.02]
    assert [r.output_tokens for r in load_trace(p, keep_zero_output=True).requests] == [10, 0, 10]


def test_caps_and_read_until(tmp_path):
    p = write(tmp_path, "big.jsonl", "\n".join(mc(i * 1000) for i in range(50)) + "\n")
    with pytest.raises(TraceError) as e:
        load_trace(p, max_requests=20)
    assert str(e.value) == (f"{p}:21: more than 20 requests: replay a part of the trace (read_until_s, or a file "
                            "cut with head -n), or raise max_requests")
    tr = load_trace(p, read_until_s=9.5)
    assert len(tr.requests) == 10 and tr.notes == [f"{p}: stopped reading at line 11, past read_until_s=9.5 s"]
    p = write(tmp_path, "long.jsonl", mc(0) + "\n" + "x" * (1 << 20) + "\n")
    with pytest.raises(TraceError, match=r"long.jsonl:2: line longer than 1,048,576 characters"):
        load_trace(p)


def test_format_override_and_detection_errors(tmp_path):
    p = write(tmp_path, "plain.txt", '{"t": 0, "input_tokens": 5, "output_tokens": 5}\n')
    assert load_trace(p).format == "plain"
    with pytest.raises(TraceError, match=r"plain.txt:1: timestamp: missing"):
        load_trace(p, fmt="mooncake")
    formats = "mooncake, azure, burstgpt, plain, weka, otel, sglang"
    with pytest.raises(TraceError, match=rf"format: expected one of {formats}, got \"sharegpt\""):
        load_trace(p, fmt="sharegpt")
    p = write(tmp_path, "odd.jsonl", '{"prompt": "hi"}\n')
    with pytest.raises(TraceError, match=r"odd.jsonl:1: cannot tell the trace format from keys \['prompt'\]"):
        load_trace(p)
    # parse_trace takes lines from anywhere; the name is only for messages
    assert len(parse_trace([mc(0), mc(5)], "inline").requests) == 2


def test_huge_file_streams(tmp_path):
    """200k rows (a 14 MB file) parse within a bounded time and without reading the file whole."""
    p = tmp_path / "huge.jsonl"
    with open(p, "w") as f:
        for i in range(200_000):
            f.write(mc(i * 10, ids=(0, i + 1)) + "\n")
    tr = load_trace(str(p))
    assert len(tr.requests) == 200_000 and tr.requests[-1].t == pytest.approx(1999.99)


# ---- replay options ----------------------------------------------------------------------------

def trace_of(times) -> list[TraceRequest]:
    return [TraceRequest(float(t), i + 1, 10) for i, t in enumerate(times)]


def test_select_window_scale_limit():
    reqs = trace_of(range(0, 100, 10))  # 0, 10, ..., 90
    assert select(reqs) == reqs
    got = select(reqs, start=25, duration=40)
    assert [(r.t, r.input_tokens) for r in got] == [(5.0, 4), (15.0, 5), (25.0, 6), (35.0, 7)]
    got = select(reqs, start=20, duration=40, time_scale=0.5)
    assert [r.t for r in got] == [0.0, 5.0, 10.0, 15.0]
    assert [r.input_tokens for r in select(reqs, start=30, limit=2)] == [4, 5]
    assert [r.t for r in select(reqs, time_scale=2.0)][:3] == [0.0, 20.0, 40.0]


def test_select_loop():
    reqs = trace_of([0, 1, 3])  # span 3, mean gap 1.5: period 4.5
    assert loop_period(reqs) == 4.5
    got = select(reqs, loop=3)
    assert [r.t for r in got] == [0, 1, 3, 4.5, 5.5, 7.5, 9.0, 10.0, 12.0]
    assert [r.input_tokens for r in got] == [1, 2, 3] * 3
    got = select(trace_of(range(0, 100, 10)), start=20, duration=30, time_scale=0.5, loop=2)
    assert [r.t for r in got] == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]  # 3 gaps of 5 s, the seam too


@pytest.mark.parametrize("kwargs,message", [
    ({"time_scale": 0}, "time_scale: expected a number > 0, got 0"),
    ({"start": -1}, "start: expected seconds >= 0, got -1"),
    ({"duration": 0}, "duration: expected seconds > 0, got 0"),
    ({"limit": 0}, "limit: expected a whole number >= 1, got 0"),
    ({"loop": 0}, "loop: expected a whole number >= 1, got 0"),
    ({"start": 500}, "no request in the window start=500 s, duration=None (the trace spans 0-90 s)"),
])
def test_select_errors(kwargs, message):
    with pytest.raises(TraceError) as e:
        select(trace_of(range(0, 100, 10)), **kwargs)
    assert str(e.value) == message


def test_loop_needs_a_period():
    with pytest.raises(TraceError, match="a trace of one request has no period"):
        select(trace_of([3]), loop=2)
    with pytest.raises(TraceError, match="every request has the same time"):
        select(trace_of([3, 3]), loop=2)


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
def test_split_for_worker_tiles_the_trace(workers):
    reqs = load_trace(sample("mooncake_sample.jsonl")).requests
    shares = [split_for_worker(reqs, i, workers) for i in range(workers)]
    ids = sorted(id(r) for share in shares for r in share)
    assert ids == sorted(id(r) for r in reqs)  # every request exactly once
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    for share in shares:  # spread in time: in each 10 s of the trace every worker has its fair part
        assert share == sorted(share, key=lambda r: r.t)
        for w0 in range(0, 60, 10):
            total = sum(w0 <= r.t < w0 + 10 for r in reqs)
            mine = sum(w0 <= r.t < w0 + 10 for r in share)
            assert abs(mine - total / workers) <= 1


def test_split_for_worker_keep_sessions():
    reqs = [TraceRequest(float(i), 1, 1, (), s) for i, s in enumerate(["a", "", "b", "a", "", "c", "b", "a", ""])]
    shares = [split_for_worker(reqs, i, 2, keep_sessions=True) for i in range(2)]
    assert sorted(id(r) for s in shares for r in s) == sorted(id(r) for r in reqs)
    for sid in "abc":
        owners = {i for i, s in enumerate(shares) for r in s if r.session_id == sid}
        assert len(owners) == 1
    # units in order of first appearance: a(0) ""(1) b(2) ""(4) c(5) ""(8), dealt to workers 0 1 0 1 0 1
    assert [r.t for r in shares[0]] == [0.0, 2.0, 3.0, 5.0, 6.0, 7.0]
    assert [r.t for r in shares[1]] == [1.0, 4.0, 8.0]
    with pytest.raises(TraceError, match=r"worker_index: expected 0..1, got 2"):
        split_for_worker(reqs, 2, 2)
    with pytest.raises(TraceError, match="workers: expected a whole number >= 1, got 0"):
        split_for_worker(reqs, 0, 0)


# ---- prompt blocks -----------------------------------------------------------------------------

def test_block_is_the_same_across_fresh_rngs_and_processes():
    block_text.cache_clear()
    a = block_text(123456, 64)
    block_text.cache_clear()  # a fresh RNG for the same id
    assert block_text(123456, 64) == a
    assert block_text(123457, 64) != a
    code = ("from llmload.workload.trace.hash_blocks import block_text; import sys; "
            "sys.stdout.write(block_text(123456, 64))")
    outs = set()
    for hashseed in ("1", "2"):  # hash() differs between these processes; the block must not
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True, timeout=60, cwd=ROOT).stdout)
    assert outs == {a}
    assert len(a.split(" ")) == 64 and all(w in WORDS for w in a.split(" "))
    # a shorter block is the start of the longer one; another run seed gives other text
    assert block_text(9, 512).startswith(block_text(9, 100) + " ")
    assert block_text(9, 100, seed=1) != block_text(9, 100)


def test_block_seeds_are_distinct():
    seeds = {block_seed(i) for i in range(200_000)}
    assert len(seeds) == 200_000


def test_prompt_from_hash_ids():
    p = prompt_from_hash_ids((0, 7, 8), 1300)
    words = p.split(" ")
    assert len(words) == 1300 and all(w in WORDS for w in words)  # no two words merged at a seam
    assert p == block_text(0) + " " + block_text(7) + " " + " ".join(block_text(8).split(" ")[:276])
    q = prompt_from_hash_ids((0, 7, 9), 1100).split(" ")
    assert q[:1024] == words[:1024] and q[1024:] != words[1024:1100]
    assert len(prompt_from_hash_ids((0, 7, 8), 512).split(" ")) == 512  # ids past the length are unused
    assert prompt_from_hash_ids((), 0) == ""
    tail = prompt_from_hash_ids((0,), 600, fill=lambda n: " ".join(["tail"] * n)).split(" ")
    assert len(tail) == 600 and tail[511] != "tail" and tail[512:] == ["tail"] * 88
    with pytest.raises(ValueError, match="1 hash ids of 512 tokens cover 512 of 600 input tokens: pass fill="):
        prompt_from_hash_ids((0,), 600)
    # every sample request gets a prompt of exactly its length, sharing the words its ids share
    reqs = load_trace(sample("mooncake_sample.jsonl")).requests
    prompts = [prompt_from_hash_ids(r.hash_ids, r.input_tokens).split(" ") for r in reqs[:40]]
    assert [len(p) for p in prompts] == [r.input_tokens for r in reqs[:40]]
    a, b = next((x, y) for x, y in zip(reqs, reqs[1:], strict=False) if x.hash_ids[:1] == y.hash_ids[:1])
    pa, pb = (prompt_from_hash_ids(r.hash_ids, r.input_tokens).split(" ") for r in (a, b))
    assert pa[:512] == pb[:512]


# ---- a scenario's trace: read once at init ------------------------------------------------------

def test_a_bad_trace_line_ends_the_run_at_init_with_file_and_line(tmp_path):
    bad = write(tmp_path, "bad.jsonl", mc(0) + "\n" + mc(5, n_in=-3) + "\n")
    scen = tmp_path / "t.yaml"
    scen.write_text(f"workloads:\n  t: {{trace: {{path: {bad}}}}}\n")
    lf = tmp_path / "lf.py"
    lf.write_text(f"from llmload import LLMUser\nclass U(LLMUser):\n    scenario = {str(scen)!r}\n")
    res = subprocess.run([sys.executable, "-m", "locust", "-f", str(lf), "--host", "http://127.0.0.1:9", "--headless",
                          "-u", "1", "-t", "2s"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT},
                         capture_output=True, text=True, timeout=60)
    lines = [x for x in (res.stdout + res.stderr).splitlines() if x.startswith("llmload: ")]
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert lines == [f"llmload: {scen}: workloads.t.trace: {bad}:2: input_length: expected a whole number >= 0, "
                     "got -3"]
