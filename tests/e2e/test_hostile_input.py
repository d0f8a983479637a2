"""Hostile or broken input gets one clear error each, naming the problem: scenario YAML (unknown
keys, alias bombs, huge numbers, wrong types, deep nesting), dataset files (unreadable, not text,
too big), a --host without a scheme, report input with missing or garbled columns."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from llmload.workload.dataset import MAX_BYTES, load_dataset
from llmload.workload.file.scenario import ScenarioError, load_scenario, parse_scenario
from llmload.workload.file.spec import DatasetSpec
from tests.support.locust_runs import CHAT, LOCUST
from tests.support.processes import ROOT

LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
YAML = [
    ("unknown key", "workloads:\n  chat:\n    wieght: 2\n",
     "y.yaml:3: workloads.chat.wieght: unknown key; did you mean weight?"),
    ("alias bomb", "shape:\n  steps: &l0 [1, 2, 3, 4, 5, 6, 7, 8, 9]\n" + LAUGHS.replace("l1: &l1", "l1: &l1") +
     "workloads: {chat: {}}\n", "more than 100,000 values once aliases are expanded (an alias bomb?)"),
    ("huge integer", "workloads:\n  chat:\n    input_tokens: 1000000000000000000000\n",
     "y.yaml:3: workloads.chat.input_tokens: 1000000000000000000000 is not a usable number"),
    ("huge length", "workloads:\n  chat:\n    output_tokens: {dist: uniform, min: 1, max: 50000000}\n",
     "y.yaml:3: workloads.chat.output_tokens: 5e+07 is too large: expected at most 10,000,000"),
    ("huge prefix", "workloads:\n  chat:\n    prefix: {tokens: 99999999999}\n",
     "workloads.chat.prefix.tokens: 99999999999 is too large: expected at most 10,000,000"),
    ("infinity", "workloads:\n  chat:\n    weight: .inf\n", "workloads.chat.weight: inf is not a usable number"),
    ("wrong type", "workloads:\n  chat:\n    max_concurrent: lots\n",
     "workloads.chat.max_concurrent: expected a whole number >= 1, got 'lots'"),
    ("list for a mapping", "workloads: [chat, rag]\n", "workloads: expected a mapping of one or more named"),
    ("deep nesting", "workloads:\n  chat:\n    extra: " + "[" * 100 + "]" * 100 + "\n", "nested more than 50 levels"),
    ("very deep nesting", "workloads: " + "[" * 20000 + "]" * 20000 + "\n", "nested too deeply to read"),
    ("not YAML", "workloads: {chat: [}\n", "y.yaml:1: not valid YAML"),
    ("huge batch", "workloads:\n  e:\n    endpoint: embeddings\n    batch_size: 1000000\n",
     "y.yaml:4: workloads.e.batch_size: 1e+06 is too large: expected at most 100,000 texts per request"),
    ("huge passages", "workloads:\n  p:\n    pipeline: [rerank, chat]\n"
     "    documents: {dist: lognormal, median: 1000000, sigma: 1}\n",
     "y.yaml:4: workloads.p.documents: a lognormal draw has no upper bound: give max: (at most 100,000 texts"),
    ("no results", "workloads:\n  r:\n    endpoint: rerank\n    top_n: 0\n",
     "y.yaml:4: workloads.r.top_n: expected a whole number >= 1, got 0"),
    ("a pipeline of text", "workloads:\n  p:\n    pipeline: embed\n", "workloads.p.pipeline: expected a mapping"),
    ("huge zipf", "workloads:\n  chat:\n    models: {zipf: {n: 99999999}}\n",
     "y.yaml:3: workloads.chat.models.zipf.n: 99999999 is too large: expected at most 10,000"),
    ("model name with spaces", "workloads:\n  chat:\n    models: {' adapter-a': 0.5}\n",
     "workloads.chat.models. adapter-a: expected a model name (text without surrounding spaces)"),
    ("models as text", "workloads:\n  chat:\n    models: adapter-a\n",
     "workloads.chat.models: expected a mapping of model names to weights"),
]


@pytest.mark.parametrize("name,text,message", YAML, ids=[c[0] for c in YAML])
def test_hostile_scenario_yaml(name, text, message):
    t0 = time.monotonic()
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "y.yaml")
    assert message in str(e.value) and "\n" not in str(e.value)
    # an alias bomb is refused, not expanded (expanded it takes minutes and gigabytes); 20 s, not 5:
    # the deep nesting took 5.06 s beside a busy loop on a host that runs Python 3× slower
    assert time.monotonic() - t0 < 20


def test_a_huge_scenario_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("workloads:\n  chat:\n    system_prompt: '" + "x" * (5 << 20) + "'\n")
    with pytest.raises(ScenarioError, match="too large for a scenario file"):
        load_scenario(str(path))


def test_a_bad_scenario_ends_a_locust_run_with_one_line(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(YAML[1][1])
    env = {**os.environ, "PYTHONPATH": ROOT}
    res = subprocess.run([*LOCUST, "-f", CHAT, "--headless", "--host", "http://127.0.0.1:9", "--scenario", str(bomb),
                          "-t", "2s"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("llmload: ")]
    assert res.returncode == 1 and len(lines) == 1 and "alias bomb" in lines[0], res.stderr[-2000:]


def _spec(path, fmt: str = "jsonl", limit: int | None = None) -> DatasetSpec:
    return DatasetSpec(path=str(path), format=fmt, turns="all", min_input_tokens=0, max_input_tokens=None,
                       limit=limit)


def test_unreadable_and_huge_datasets(tmp_path):
    cases = []
    cases.append((_spec(tmp_path), "cannot read the dataset: not a regular file"))  # a directory
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # opening it would block forever: refused before that
    cases.append((_spec(fifo), "cannot read the dataset: not a regular file"))
    cases.append((_spec(tmp_path / "missing.jsonl"), "cannot read the dataset: No such file or directory"))
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"prompt": "\xff\xfe"}\n')
    cases.append((_spec(binary), "not UTF-8 text (byte 12)"))
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:  # sparse: no disk is used
        f.truncate(MAX_BYTES + (1 << 30))
    cases.append((_spec(huge, "sharegpt"), "the dataset is 2.0 GiB, over the 1 GiB read into memory"))
    for spec, message in cases:
        with pytest.raises(ScenarioError) as e:
            load_dataset(spec)
        assert message in str(e.value) and str(spec.path) in str(e.value), (spec.path, str(e.value))


def test_a_big_jsonl_with_limit_is_read_only_as_far_as_needed(tmp_path):
    path = tmp_path / "many.jsonl"
    with open(path, "w") as f:
        f.write('{"prompt": "hello there"}\n' * 50_000)
        f.truncate(MAX_BYTES + 4096)  # a sparse tail past the limit, never read
    assert len(load_dataset(_spec(path, limit=10))) == 10
    with pytest.raises(ScenarioError, match="set limit:"):
        load_dataset(_spec(path))


def test_host_without_a_scheme_is_one_line_at_init(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    res = subprocess.run([*LOCUST, "-f", CHAT, "--headless", "--host", "127.0.0.1:8000", "-t", "2s"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("llmload: ")]
    assert res.returncode == 1
    assert lines == ["llmload: --host '127.0.0.1:8000': expected a URL with its scheme, "
                     "http(s)://HOST[:PORT][/base/path], e.g. http://127.0.0.1:8000"]


GOOD_HEAD = ("request_id,start_time,scenario,status,http_status,ttft_ms,ttft_visible_ms,tpot_ms,e2e_ms,itl_max_ms,"
             "prompt_tokens,cached_tokens,completion_tokens,max_tokens,token_source,finish_reason,users,worker,"
             "session_id,turn,error,scheduled_time,requested_input_tokens,arrival_rate,backoff_ms")
GOOD_ROW = "a-1,1000.0,chat,ok,200,50,50,10,500,12,100,0,46,46,usage,stop,4,0,,,,,100,,"
REPORT_INPUT = [
    ("missing columns", "request_id,ttft_ms\na-1,50\n", "missing column(s) start_time, status, users"),
    ("binary", None, "not a CSV file (binary data)"),
    ("doubled column", GOOD_HEAD + ",status\n" + GOOD_ROW + ",ok\n", "column(s) status appear more than once"),
    ("header only", GOOD_HEAD + "\n", "no usable request rows"),
    ("garbled values", GOOD_HEAD + "\n" + "x,yesterday,chat,fine,200\n" * 3, "no usable request rows"),
    ("empty", "", "the file is empty"),
]


@pytest.mark.parametrize("name,text,message", REPORT_INPUT, ids=[c[0] for c in REPORT_INPUT])
def test_report_input_with_missing_or_garbled_columns(name, text, message, tmp_path):
    path = tmp_path / "bad_requests.csv"
    if text is None:
        path.write_bytes(os.urandom(4096).replace(b"\n", b"\0") + b"\n")
    else:
        path.write_text(text)
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(path), "--out", str(tmp_path / "r")],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [res.stderr.strip()] and message in res.stderr, res.stderr


def test_report_skips_broken_rows_with_a_warning_and_merges_files(tmp_path):
    rows = [GOOD_ROW.replace("a-1,1000.0", f"a-{i},{1000.0 + i * 0.5}") for i in range(60)]
    (tmp_path / "a_requests.csv").write_text(GOOD_HEAD + "\n" + "\n".join(rows[:40]) + "\nbroken,line\n")
    (tmp_path / "b.csv").write_text(GOOD_HEAD + "\n" + "\n".join(rows[30:]) + "\n")  # 10 rows in both
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(tmp_path / "a"), str(tmp_path / "b.csv"),
                          "--out", str(tmp_path / "r")], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "r" / "report.md").read_text()
    assert "10 request(s) found in more than one file were counted once" in md
    assert "1 row(s) without a known status, start_time or users were skipped" in md
    assert "Source: `" in md and ", " in md.split("Source: `")[1].split("`")[0]  # both files named
    assert "60 requests" in md
