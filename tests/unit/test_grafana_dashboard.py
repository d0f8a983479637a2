"""deploy/grafana/llmload.json (issue 22): every query names only series that llmload's
``/llmload/metrics``, the mock's vLLM format or NVIDIA dcgm-exporter (the fixture rendered from its
default counters) really export; and the file is what scripts/grafana_dashboard.py writes."""

from __future__ import annotations

import json
import os
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmload.metrics.record import CSV_COLUMNS
from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, EngineRequest
from llmload.mock.engine.metrics_state import EngineStats
from llmload.mock.telemetry.prometheus import render_metrics
from llmload.plugin.output.prometheus_export import LLMLoadMetrics
from scripts.grafana_dashboard import OUT, dashboard
from tests.support.processes import ROOT

pytestmark = pytest.mark.unit
PROMQL_WORDS = {"sum", "avg", "max", "min", "by", "without", "rate", "increase", "histogram_quantile", "and", "or",
                "on", "ignoring", "le"}


def sample_names(text: str) -> set[str]:
    """Every series name a scrape of ``text`` holds (the raw lines' names: a counter's name is what
    Prometheus stores, whatever the parser makes its family)."""
    names = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    return names | {m.group(1) for m in re.finditer(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", text, re.M)}


def exported() -> set[str]:
    row = {c: None for c in CSV_COLUMNS} | {"scenario": "chat", "status": "ok", "ttft_ms": 120.0, "tpot_ms": 20.0,
                                            "e2e_ms": 900.0, "itl_max_ms": 40.0, "prompt_tokens": 10,
                                            "completion_tokens": 5}
    ours = LLMLoadMetrics(model_of=lambda: "m", state=lambda: {"users": 1, "in_flight": {"chat": 1}, "health": []})
    ours.add_rows([tuple(row[c] for c in CSV_COLUMNS)])
    engine = BatchingEngine(EngineParams())
    engine.stats = EngineStats("vllm", EngineParams().max_model_len)
    engine.submit(EngineRequest(prompt_words=["w"] * 20, output_tokens=4), now=0.0)
    engine.advance(0.0)
    vllm = render_metrics(engine, "m", {"completed": 1})
    with open(os.path.join(ROOT, "tests", "fixtures", "metrics", "dcgm.prom"), encoding="utf-8") as f:
        dcgm = f.read()
    return sample_names(ours.exposition().decode()) | sample_names(vllm) | sample_names(dcgm)


def series_in(expr: str) -> set[str]:
    bare = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges
    bare = re.sub(r"\b(by|without)\s*\([^)]*\)", "", bare)  # grouping labels
    bare = re.sub(r"[A-Za-z_]+\s*\(", "(", bare)  # function names
    names = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare)
    return {n for n in names if n not in PROMQL_WORDS and not n.startswith("__")}


def test_every_query_names_a_series_that_is_really_exported():
    with open(OUT, encoding="utf-8") as f:
        board = json.load(f)
    targets = [t for p in board["panels"] for t in p.get("targets", [])]
    assert len(targets) >= 20
    have = exported()
    named = {n for t in targets for n in series_in(t["expr"])}
    assert {"gen_ai_client_operation_time_to_first_chunk_seconds_bucket", "vllm:num_requests_waiting",
            "DCGM_FI_DEV_POWER_USAGE"} <= named  # the parser sees names at all
    missing = sorted(named - have)
    assert not missing, f"deploy/grafana/llmload.json queries series nobody exports: {missing}"


def test_the_file_is_what_the_script_writes():
    with open(OUT, encoding="utf-8") as f:
        assert json.load(f) == dashboard(), "run python scripts/grafana_dashboard.py"
