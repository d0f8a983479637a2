"""Hostile files get one line each, never a traceback or an unbounded read (issue 19, rows 12-14)."""

from __future__ import annotations

import json

import pytest

from llmload.workload.file.scenario import ScenarioError, load_scenario, parse_scenario
from llmload.workload.file.yaml_lines import MAX_BYTES
from llmload.workload.trace.formats import TraceError
from llmload.workload.trace.read import MAX_TOKENS_PER_REQUEST, load_trace


def test_a_trace_row_asking_for_ten_billion_tokens_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "input_length": 100, "output_length": 10}) + "\n"
                    + json.dumps({"timestamp": 5, "input_length": 10**10, "output_length": 10}) + "\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:2: input tokens: 10,000,000,000 is more than"):
        load_trace(str(path))
    path.write_text(json.dumps({"timestamp": 0, "input_length": MAX_TOKENS_PER_REQUEST, "output_length": 1}) + "\n")
    assert load_trace(str(path)).requests[0].input_tokens == MAX_TOKENS_PER_REQUEST


def test_broken_csv_in_a_trace_is_one_line(tmp_path):
    path = tmp_path / "azure.csv"
    # a quoted field longer than the csv module's field limit (131,072 characters)
    rows = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,10,5\n"
    path.write_text(rows + "\"" + "x" * 200_000 + "\",1,1\n")
    with pytest.raises(TraceError, match=r"azure\.csv: not valid CSV"):
        load_trace(str(path))


def test_images_per_request_and_distinct_pictures_are_capped():
    base = "workloads:\n  a:\n    images: {%s}\n"
    with pytest.raises(ScenarioError, match="distinct: 100000 is too large"):
        parse_scenario(base % "distinct: 100000", "s.yaml", ".")
    with pytest.raises(ScenarioError, match="count: 1000 is too large"):
        parse_scenario(base % "count: 1000", "s.yaml", ".")
    assert parse_scenario(base % "distinct: 16", "s.yaml", ".").workloads[0].images.distinct == 16


def test_a_huge_scenario_file_is_not_read_whole(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("#" * (MAX_BYTES + 10))
    with pytest.raises(ScenarioError, match="too large for a scenario file"):
        load_scenario(str(path))


def test_dev_zero_as_a_scenario_ends_at_once():
    with pytest.raises(ScenarioError):
        load_scenario("/dev/zero")
