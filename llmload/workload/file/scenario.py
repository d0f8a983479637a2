"""Scenario files: find them, read them, validate them into a :class:`ScenarioSpec`.

A file defines one or more named workloads (see scenarios/*.yaml for each feature)::

    seed: 7
    defaults: {model: my-model, ignore_eos: true}
    workloads:
      rag:
        weight: 3
        input_tokens: {dist: normal, mean: 300, std: 50, min: 50}   # the unique part of each prompt
        output_tokens: 128
        prefix: {groups: [{name: docs, tokens: 2000, count: 8, popularity: zipf}]}
        slo: {ttft_p95_ms: 3000}

Errors name the file, the line, the key path and the fix. The types are in :mod:`.spec`, the
per-section parsers in :mod:`.sections`, the line-marked YAML in :mod:`.yaml_lines`.

Usage::

    path = resolve_scenario_path("scenarios/rag.yaml", "locustfiles/rag.py")
    spec = load_scenario(path)                 # -> ScenarioSpec, or raises ScenarioError
"""

from __future__ import annotations

import os

from llmload.workload.file.sections_core import WORKLOAD_KEYS, parse_workload
from llmload.workload.file.spec import (
    ArrivalSpec,
    DatasetSpec,
    PrefixGroup,
    ScenarioError,
    ScenarioSpec,
    SessionSpec,
    WorkloadSpec,
)
from llmload.workload.file.yaml_lines import MAX_BYTES, compose, keys, whole

__all__ = ["ArrivalSpec", "DatasetSpec", "PrefixGroup", "ScenarioError", "ScenarioSpec", "SessionSpec",
           "WorkloadSpec", "is_scenario_file", "load_scenario", "load_scenario_cached", "parse_scenario",
           "resolve_scenario_path"]

SHAPE_KEYS = {"steps", "step_seconds", "spawn_rate", "step_precision", "step_warmup_s", "step_sample_floor",
              "slo_stop_after_s", "slo_stop_action", "ramp_users",
              "ramp_seconds", "ramp_hold_seconds", "rate_steps", "search", "search_min", "search_max",
              "search_precision", "search_warmup_s", "search_sample_floor"}  # as docs/scenarios.md lists them
TOP_KEYS = {"seed", "defaults", "workloads", "tokenizer", "description", "shape"}


def is_scenario_file(name: str) -> bool:
    """A scenario is a YAML file when its name ends in .yaml/.yml; any other name is synthetic chat."""
    return str(name).endswith((".yaml", ".yml"))


def resolve_scenario_path(path: str, *anchors: str) -> str:
    """Where a scenario file is: as given (absolute, or relative to the working directory), else
    relative to each anchor (a locustfile or a directory) and to the anchor's parent directory.
    Returns ``path`` unchanged when no candidate exists, so the loader reports it missing."""
    if os.path.isabs(path) or os.path.exists(path):
        return path
    for anchor in anchors:
        if not anchor:
            continue
        here = os.path.abspath(anchor)
        if not os.path.isdir(here):
            here = os.path.dirname(here)
        for base in (here, os.path.dirname(here)):
            candidate = os.path.join(base, path)
            if os.path.exists(candidate):
                return candidate
    return path


def parse_scenario(text: str, path: str = "<scenario>", base_dir: str = ".") -> ScenarioSpec:
    raw, ctx = compose(text, path)
    raw = keys(ctx, raw, "", TOP_KEYS)
    shape = keys(ctx, raw.get("shape") or {}, "shape", SHAPE_KEYS)
    seed = whole(ctx, raw, "seed", "", default=None, minimum=0)
    defaults = keys(ctx, raw.get("defaults") or {}, "defaults", WORKLOAD_KEYS - {"weight"})
    workloads = raw.get("workloads")
    if not isinstance(workloads, dict) or not workloads:
        raise ctx.error("workloads", "expected a mapping of one or more named workloads")
    specs = tuple(parse_workload(ctx, str(name), w, defaults, base_dir) for name, w in workloads.items())
    tokenizer = raw.get("tokenizer")
    if tokenizer is not None:
        if not isinstance(tokenizer, str):
            raise ctx.error("tokenizer", f"expected a path to a tokenizer.json, got {tokenizer!r}")
        tokenizer = tokenizer if os.path.isabs(tokenizer) else os.path.join(base_dir, tokenizer)
        if not os.path.exists(tokenizer):
            raise ctx.error("tokenizer", f"no such file {tokenizer}")
    return ScenarioSpec(path=path, seed=seed, workloads=specs, tokenizer=tokenizer, shape=dict(shape))


def load_scenario(path: str) -> ScenarioSpec:
    try:
        with open(path, encoding="utf-8") as f:
            # read at most one byte past the cap: a huge file, or /dev/zero, is never read whole
            text = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read the scenario file: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not a text file (expected UTF-8 YAML)") from None
    if len(text) > MAX_BYTES:
        raise ScenarioError(f"{path}: more than {MAX_BYTES:,} characters is too large for a scenario file; put "
                            "prompts in a dataset: file")
    return parse_scenario(text, path, os.path.dirname(os.path.abspath(path)))


_cache: dict[str, ScenarioSpec] = {}


def load_scenario_cached(path: str) -> ScenarioSpec:
    """``load_scenario`` once per process and file (every user of a class shares the spec)."""
    key = os.path.abspath(path)
    spec = _cache.get(key)
    if spec is None:
        spec = _cache[key] = load_scenario(path)
    return spec
