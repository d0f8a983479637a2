"""Scenario files: YAML → validated specs. Errors name the file, the line, the key path and the fix.

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

Usage::

    spec = load_scenario("scenarios/rag.yaml")      # -> ScenarioSpec, or raises ScenarioError
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from llmload.workload.distributions import Distribution, SpecError, parse_distribution

ENDPOINTS = ("chat", "completions")


class ScenarioError(ValueError):
    """``file:line: key.path: what was expected``."""


@dataclass(frozen=True)
class PrefixGroup:
    name: str
    tokens: int
    count: int
    popularity: str  # "uniform" | "zipf"
    zipf_s: float
    weight: float


@dataclass(frozen=True)
class SessionSpec:
    turns: Distribution
    think_time_s: Distribution


@dataclass(frozen=True)
class DatasetSpec:
    path: str  # absolute
    format: str  # "sharegpt" | "jsonl"
    min_input_tokens: int
    max_input_tokens: int | None
    turns: str  # "all" | "first"
    limit: int | None


@dataclass(frozen=True)
class ArrivalSpec:
    mode: str  # "closed" | "open"
    rate: float = 0.0  # requests/s over the whole run (split over worker processes)
    burstiness: float = 1.0  # gamma shape of the gaps; 1 = Poisson, < 1 burstier
    max_in_flight: int | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    weight: float = 1.0
    endpoint: str = "chat"
    model: str | None = None
    system_prompt: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    ignore_eos: bool = False
    input_tokens: Distribution | None = None
    output_tokens: Distribution | None = None
    prefix_groups: tuple[PrefixGroup, ...] = ()
    max_concurrent: int | None = None
    session: SessionSpec | None = None
    dataset: DatasetSpec | None = None
    arrival: ArrivalSpec = ArrivalSpec("closed")
    slo: dict[str, float] = field(default_factory=dict)

    def expected_prefix_hit_ratio(self) -> float | None:
        """Share of prompt tokens a warm prefix cache can serve: whole 16-token blocks of the
        shared prefix ÷ prefix + mean unique part. An upper bound (first uses and evictions miss)."""
        if not self.prefix_groups:
            return None
        unique = self.input_tokens.mean if self.input_tokens is not None else 256.0
        total_w = sum(g.weight for g in self.prefix_groups)
        ratio = 0.0
        for g in self.prefix_groups:
            cacheable = (g.tokens // 16) * 16
            ratio += g.weight / total_w * cacheable / (g.tokens + unique)
        return ratio


@dataclass(frozen=True)
class ScenarioSpec:
    path: str
    seed: int
    workloads: tuple[WorkloadSpec, ...]
    tokenizer: str | None = None
    shape: dict[str, Any] = field(default_factory=dict)  # load-shape settings (llmload.shapes reads them)

    def workload(self, name: str) -> WorkloadSpec:
        for w in self.workloads:
            if w.name == name:
                return w
        raise ScenarioError(f"{self.path}: no workload {name!r}; it has {', '.join(w.name for w in self.workloads)}")


# -- YAML with line numbers ----------------------------------------------------------------------

def _to_python(node: yaml.Node, path: str, lines: dict[str, int]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            key = str(k.value) if isinstance(k, yaml.ScalarNode) else str(_to_python(k, path, {}))
            sub = f"{path}.{key}" if path else key
            lines[sub] = k.start_mark.line + 1
            out[key] = _to_python(v, sub, lines)
            lines[sub] = k.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, f"{path}[{i}]", lines) for i, v in enumerate(node.value)]
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


class _Ctx:
    def __init__(self, path: str, lines: dict[str, int]) -> None:
        self.path = path
        self.lines = lines

    def error(self, key_path: str, message: str) -> ScenarioError:
        line = None
        p = key_path
        while p:
            if p in self.lines:
                line = self.lines[p]
                break
            p = p.rsplit(".", 1)[0] if "." in p else ""
        where = f"{self.path}:{line}" if line else self.path
        return ScenarioError(f"{where}: {key_path}: {message}")


def _keys(ctx: _Ctx, d: Any, path: str, known: set[str]) -> dict:
    if not isinstance(d, dict):
        raise ctx.error(path, f"expected a mapping, got {type(d).__name__}")
    for k in d:
        if k not in known:
            raise ctx.error(f"{path}.{k}" if path else k, f"unknown key (known: {', '.join(sorted(known))})")
    return d


def _int(ctx: _Ctx, d: dict, key: str, path: str, default: Any = None, minimum: int = 1) -> Any:
    if key not in d:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ctx.error(f"{path}.{key}", f"expected a whole number >= {minimum}, got {v!r}")
    return v


def _float(ctx: _Ctx, d: dict, key: str, path: str, default: Any = None, minimum: float = 0.0,
           strict: bool = False) -> Any:
    if key not in d:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) or v < minimum or (
            strict and v <= minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ctx.error(f"{path}.{key}", f"expected a number {bound}, got {v!r}")
    return float(v)


SHAPE_KEYS = {"steps", "step_seconds", "spawn_rate", "slo_stop_after_s", "slo_stop_action", "ramp_users",
              "ramp_seconds", "ramp_hold_seconds", "rate_steps"}
WORKLOAD_KEYS = {"weight", "endpoint", "model", "system_prompt", "sampling", "extra", "ignore_eos", "input_tokens",
                 "output_tokens", "prefix", "max_concurrent", "session", "dataset", "arrival", "slo"}


def _dist(ctx: _Ctx, d: dict, key: str, path: str, integer: bool = True, minimum: float = 0.0) -> Any:
    if key not in d:
        return None
    try:
        return parse_distribution(d[key], f"{path}.{key}", integer=integer, minimum=minimum)
    except SpecError as e:
        raise ctx.error(e.path, e.message) from None


def _workload(ctx: _Ctx, name: str, raw: Any, defaults: dict, base_dir: str) -> WorkloadSpec:
    path = f"workloads.{name}"
    raw = _keys(ctx, raw if raw is not None else {}, path, WORKLOAD_KEYS)
    d = {**defaults, **raw}
    endpoint = d.get("endpoint", "chat")
    if endpoint not in ENDPOINTS:
        raise ctx.error(f"{path}.endpoint", f"expected chat or completions, got {endpoint!r}")
    for key in ("sampling", "extra", "slo"):
        if key in d and not isinstance(d[key], dict):
            raise ctx.error(f"{path}.{key}", f"expected a mapping, got {type(d[key]).__name__}")
    for key in ("model", "system_prompt"):
        if key in d and d[key] is not None and not isinstance(d[key], str):
            raise ctx.error(f"{path}.{key}", f"expected text, got {d[key]!r}")
    if "ignore_eos" in d and not isinstance(d["ignore_eos"], bool):
        raise ctx.error(f"{path}.ignore_eos", f"expected true or false, got {d['ignore_eos']!r}")
    slo: dict[str, float] = {}
    for metric, limit in (d.get("slo") or {}).items():
        from llmload.report.slo import parse_slo

        try:
            parse_slo(f"{metric}={limit}", "slo")
        except ValueError as e:
            raise ctx.error(f"{path}.slo.{metric}", str(e).split(": ", 1)[-1]) from None
        slo[metric] = float(limit)
    groups: list[PrefixGroup] = []
    if "prefix" in d:
        p = _keys(ctx, d["prefix"], f"{path}.prefix", {"groups", "tokens", "count", "popularity", "zipf_s"})
        raw_groups = p.get("groups")
        if raw_groups is None:  # shorthand: one group
            raw_groups = [{k: v for k, v in p.items() if k != "groups"} | {"name": "prefix"}]
            gpaths = [f"{path}.prefix"]
        else:
            if not isinstance(raw_groups, list) or not raw_groups:
                raise ctx.error(f"{path}.prefix.groups", "expected a non-empty list of groups")
            gpaths = [f"{path}.prefix.groups[{i}]" for i in range(len(raw_groups))]
        for g, gp in zip(raw_groups, gpaths, strict=True):
            g = _keys(ctx, g, gp, {"name", "tokens", "count", "popularity", "zipf_s", "weight"})
            popularity = g.get("popularity", "uniform")
            if popularity not in ("uniform", "zipf"):
                raise ctx.error(f"{gp}.popularity", f"expected uniform or zipf, got {popularity!r}")
            if "tokens" not in g:
                raise ctx.error(f"{gp}.tokens", "missing: how long each shared prefix is, in tokens")
            groups.append(PrefixGroup(
                name=str(g.get("name", f"group{len(groups)}")),
                tokens=_int(ctx, g, "tokens", gp),
                count=_int(ctx, g, "count", gp, default=1),
                popularity=popularity,
                zipf_s=_float(ctx, g, "zipf_s", gp, default=1.0, minimum=0.0, strict=True),
                weight=_float(ctx, g, "weight", gp, default=1.0, minimum=0.0, strict=True),
            ))
    session = None
    if "session" in d:
        s = _keys(ctx, d["session"], f"{path}.session", {"turns", "think_time_s"})
        turns = _dist(ctx, s, "turns", f"{path}.session", minimum=1) or parse_distribution(3, "turns", minimum=1)
        think = _dist(ctx, s, "think_time_s", f"{path}.session", integer=False) or parse_distribution(
            0, "think", integer=False)
        session = SessionSpec(turns=turns, think_time_s=think)
    dataset = None
    if "dataset" in d:
        ds = d["dataset"]
        if isinstance(ds, str):
            ds = {"path": ds}
        ds = _keys(ctx, ds, f"{path}.dataset", {"path", "format", "min_input_tokens", "max_input_tokens", "turns",
                                                 "limit"})
        if not isinstance(ds.get("path"), str):
            raise ctx.error(f"{path}.dataset.path", "missing: the dataset file, relative to the scenario file")
        full = ds["path"] if os.path.isabs(ds["path"]) else os.path.join(base_dir, ds["path"])
        if not os.path.exists(full):
            raise ctx.error(f"{path}.dataset.path", f"no such file {full}")
        fmt = ds.get("format") or ("jsonl" if full.endswith(".jsonl") else "sharegpt")
        if fmt not in ("sharegpt", "jsonl"):
            raise ctx.error(f"{path}.dataset.format", f"expected sharegpt or jsonl, got {fmt!r}")
        turns = ds.get("turns", "all")
        if turns not in ("all", "first"):
            raise ctx.error(f"{path}.dataset.turns", f"expected all or first, got {turns!r}")
        lo = _int(ctx, ds, "min_input_tokens", f"{path}.dataset", default=0, minimum=0)
        hi = _int(ctx, ds, "max_input_tokens", f"{path}.dataset", default=None)
        if hi is not None and hi < lo:
            raise ctx.error(f"{path}.dataset.max_input_tokens", f"{hi} is below min_input_tokens {lo}")
        dataset = DatasetSpec(path=full, format=fmt, min_input_tokens=lo, max_input_tokens=hi, turns=turns,
                              limit=_int(ctx, ds, "limit", f"{path}.dataset", default=None))
    arrival = ArrivalSpec("closed")
    if "arrival" in d:
        a = _keys(ctx, d["arrival"], f"{path}.arrival", {"mode", "rate", "burstiness", "max_in_flight"})
        mode = a.get("mode", "open" if "rate" in a else "closed")
        if mode not in ("closed", "open"):
            raise ctx.error(f"{path}.arrival.mode", f"expected closed or open, got {mode!r}")
        rate = _float(ctx, a, "rate", f"{path}.arrival", default=None, minimum=0.0, strict=True)
        if mode == "open" and rate is None:
            raise ctx.error(f"{path}.arrival.rate", "missing: open-loop arrivals need a rate in requests/s")
        arrival = ArrivalSpec(mode=mode, rate=rate or 0.0,
                              burstiness=_float(ctx, a, "burstiness", f"{path}.arrival", 1.0, 0.0, strict=True),
                              max_in_flight=_int(ctx, a, "max_in_flight", f"{path}.arrival", default=None))
    if session is not None and arrival.mode == "open":
        raise ctx.error(f"{path}.arrival", "open-loop arrivals and multi-turn sessions do not mix: a session's "
                        "next turn waits for the reply")
    inp = _dist(ctx, d, "input_tokens", path)
    out = _dist(ctx, d, "output_tokens", path, minimum=1)
    return WorkloadSpec(
        name=name,
        weight=_float(ctx, d, "weight", path, default=1.0, strict=True),
        endpoint=endpoint,
        model=d.get("model"),
        system_prompt=d.get("system_prompt"),
        sampling=dict(d.get("sampling") or {}),
        extra=dict(d.get("extra") or {}),
        ignore_eos=bool(d.get("ignore_eos", False)),
        input_tokens=inp if inp is not None or dataset is not None else parse_distribution(256, "input_tokens"),
        output_tokens=out if out is not None or dataset is not None else parse_distribution(128, "output_tokens"),
        prefix_groups=tuple(groups),
        max_concurrent=_int(ctx, d, "max_concurrent", path, default=None),
        session=session,
        dataset=dataset,
        arrival=arrival,
        slo=slo,
    )


def parse_scenario(text: str, path: str = "<scenario>", base_dir: str = ".") -> ScenarioSpec:
    lines: dict[str, int] = {}
    ctx = _Ctx(path, lines)
    try:
        node = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise ScenarioError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if node is None:
        raise ScenarioError(f"{path}: the file is empty; expected a mapping with workloads:")
    raw = _to_python(node, "", lines)
    raw = _keys(ctx, raw, "", {"seed", "defaults", "workloads", "tokenizer", "description", "shape"})
    shape = _keys(ctx, raw.get("shape") or {}, "shape", SHAPE_KEYS)
    seed = _int(ctx, raw, "seed", "", default=0, minimum=0)
    defaults = raw.get("defaults") or {}
    _keys(ctx, defaults, "defaults", WORKLOAD_KEYS - {"weight"})
    workloads = raw.get("workloads")
    if not isinstance(workloads, dict) or not workloads:
        raise ctx.error("workloads", "expected a mapping of one or more named workloads")
    specs = tuple(_workload(ctx, str(name), w, defaults, base_dir) for name, w in workloads.items())
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
            text = f.read()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read the scenario file: {e.strerror}") from None
    return parse_scenario(text, path, os.path.dirname(os.path.abspath(path)))


_cache: dict[str, ScenarioSpec] = {}


def load_scenario_cached(path: str) -> ScenarioSpec:
    """``load_scenario`` once per process and file (every user of a class shares the spec)."""
    key = os.path.abspath(path)
    spec = _cache.get(key)
    if spec is None:
        spec = _cache[key] = load_scenario(path)
    return spec
