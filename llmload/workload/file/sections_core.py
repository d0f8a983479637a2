"""One parser per section of a workload in a scenario file: prefix, session, dataset, arrival, slo,
and the workload that holds them (trace, images, agent sessions and response_format are parsed in
:mod:`.traffic_sections`). Each takes the raw mapping and its key path and returns a spec,
or raises a ScenarioError that names the file, the line and the key.

Usage::

    spec = parse_workload(ctx, "rag", raw_mapping, defaults={}, base_dir="scenarios")
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from llmload.metrics.slo import SLO, parse_slo
from llmload.wire.endpoints import BODY, STREAM, names
from llmload.wire.protocol import ENV_PREFIX, parse_header
from llmload.wire.redact import is_secret_name
from llmload.workload.distributions import Distribution, SpecError, parse_distribution
from llmload.workload.file.body_section import BODY_KEYS, fitting_defaults, parse_body
from llmload.workload.file.graph_section import parse_graph
from llmload.workload.file.models_section import parse_models
from llmload.workload.file.priority_section import parse_priority, with_priority
from llmload.workload.file.sections_production import (
    parse_agent,
    parse_images,
    parse_response_format,
    parse_trace_section,
)
from llmload.workload.file.spec import AgentSpec, ArrivalSpec, DatasetSpec, PrefixGroup, SessionSpec, WorkloadSpec
from llmload.workload.file.yaml_lines import MAX_PREFIXES, MAX_TOKENS, Ctx, choice, file_section, keys, number, whole
from llmload.workload.tasks.call_graph import GraphSpec

BLOCK = 16  # tokens per KV-cache block (vLLM's default): a prefix is cached in whole blocks
WORKLOAD_KEYS = {"weight", "endpoint", "model", "system_prompt", "sampling", "extra", "ignore_eos", "input_tokens",
                 "output_tokens", "prefix", "max_concurrent", "session", "dataset", "arrival", "slo", "headers",
                 "trace", "images", "response_format", "prefix_hit_rate", "priority", "models"} | BODY_KEYS
PREFIX_KEYS = {"groups", "tokens", "count", "popularity", "zipf_s", "prime"}
GROUP_KEYS = {"name", "tokens", "count", "popularity", "zipf_s", "weight"}
DATASET_KEYS = {"path", "format", "min_input_tokens", "max_input_tokens", "turns", "limit"}
ARRIVAL_KEYS = {"mode", "rate", "burstiness", "max_in_flight"}


def distribution(ctx: Ctx, d: dict, key: str, path: str, integer: bool = True,
                 minimum: float = 0.0) -> Distribution | None:
    if key not in d:
        return None
    try:
        dist = parse_distribution(d[key], f"{path}.{key}", integer=integer, minimum=minimum)
    except SpecError as e:
        raise ctx.error(e.path, e.message) from None
    if integer:  # lengths and counts: a huge one would build a prompt no memory holds
        top = dist.hi if math.isfinite(dist.hi) else dist.mean
        if not top <= MAX_TOKENS:
            raise ctx.error(f"{path}.{key}", f"{top:g} is too large: expected at most {MAX_TOKENS:,}")
        dist = dataclasses.replace(dist, hi=min(dist.hi, MAX_TOKENS))
    return dist


def parse_prefix(ctx: Ctx, raw: Any, path: str) -> tuple[PrefixGroup, ...]:
    """``prefix: {groups: [...]}``, or one group written directly under ``prefix:``."""
    p = keys(ctx, raw, path, PREFIX_KEYS)
    raw_groups = p.get("groups")
    if raw_groups is None:
        raw_groups = [{k: v for k, v in p.items() if k not in ("groups", "prime")} | {"name": "prefix"}]
        group_paths = [path]
    else:
        if not isinstance(raw_groups, list) or not raw_groups:
            raise ctx.error(f"{path}.groups", "expected a non-empty list of groups")
        group_paths = [f"{path}.groups[{i}]" for i in range(len(raw_groups))]
    groups: list[PrefixGroup] = []
    for g, gp in zip(raw_groups, group_paths, strict=True):
        g = keys(ctx, g, gp, GROUP_KEYS)
        if "tokens" not in g:
            raise ctx.error(f"{gp}.tokens", "missing: how long each shared prefix is, in tokens")
        groups.append(PrefixGroup(
            name=str(g.get("name", f"group{len(groups)}")),
            tokens=whole(ctx, g, "tokens", gp, maximum=MAX_TOKENS),
            count=whole(ctx, g, "count", gp, default=1, maximum=MAX_PREFIXES),
            popularity=choice(ctx, g, "popularity", gp, ("uniform", "zipf"), "uniform"),
            zipf_s=number(ctx, g, "zipf_s", gp, default=1.0, minimum=0.0, strict=True),
            weight=number(ctx, g, "weight", gp, default=1.0, minimum=0.0, strict=True),
        ))
    return tuple(groups)


def hit_rate_prefix(ctx: Ctx, d: dict, path: str, unique: Distribution | None) -> tuple[float | None, Any]:
    """``prefix_hit_rate: R``: the intended share of prompt tokens that is a prefix already sent, and
    the ``prefix:`` section that makes it: each group's prefix is R/(1-R) x the mean unique part
    (``input_tokens``), in whole 16-token blocks (what engines cache), so prefix / (prefix + unique)
    is R. The groups' count, popularity and weight are the file's; their ``tokens`` are not."""
    if "prefix_hit_rate" not in d:
        return None, d.get("prefix")
    rate = number(ctx, d, "prefix_hit_rate", path)
    if not rate < 1:
        raise ctx.error(f"{path}.prefix_hit_rate", f"expected a share of prompt tokens 0..1 (below 1), got {rate!r}")
    mean_unique = unique.mean if unique is not None else 256.0
    tokens = int(round(rate / (1 - rate) * mean_unique / BLOCK)) * BLOCK
    raw = d.get("prefix") or {"groups": [{"name": "shared"}]}
    if rate == 0 or tokens < BLOCK:
        return rate, None
    groups = raw.get("groups") if isinstance(raw, dict) else None
    entries = groups if isinstance(groups, list) else [raw]
    for i, g in enumerate(entries):
        if isinstance(g, dict) and "tokens" in g:
            where = f"{path}.prefix.groups[{i}]" if groups is not None else f"{path}.prefix"
            raise ctx.error(f"{where}.tokens", "is set by prefix_hit_rate (each prefix is what makes that share): "
                            "leave it out, or drop prefix_hit_rate")
    filled = [{**g, "tokens": tokens} if isinstance(g, dict) else g for g in entries]
    return rate, ({**raw, "groups": filled} if groups is not None else {**raw, "tokens": tokens})


def parse_session(ctx: Ctx, raw: Any, path: str) -> SessionSpec | AgentSpec | GraphSpec:
    """``session: {turns, think_time_s}`` (chat turns), ``{kind: agent, ...}`` (tool loops) or
    ``{kind: graph, ...}`` (call graphs)."""
    if isinstance(raw, dict) and raw.get("kind") == "agent":
        return parse_agent(ctx, raw, path)
    if isinstance(raw, dict) and raw.get("kind") == "graph":
        return parse_graph(ctx, raw, path)
    s = keys(ctx, raw, path, {"kind", "turns", "think_time_s"})
    choice(ctx, s, "kind", path, ("chat", "agent", "graph"), "chat")
    turns = distribution(ctx, s, "turns", path, minimum=1) or parse_distribution(3, "turns", minimum=1)
    think = distribution(ctx, s, "think_time_s", path, integer=False) or parse_distribution(0, "think", integer=False)
    return SessionSpec(turns=turns, think_time_s=think)


def parse_dataset(ctx: Ctx, raw: Any, path: str, base_dir: str) -> DatasetSpec:
    """``dataset: FILE`` or ``dataset: {path: FILE, ...}``; the path is relative to the scenario file."""
    ds, full = file_section(ctx, raw, path, base_dir, DATASET_KEYS, "dataset")
    fmt = choice(ctx, ds, "format", path, ("sharegpt", "jsonl"), "jsonl" if full.endswith(".jsonl") else "sharegpt")
    lo = whole(ctx, ds, "min_input_tokens", path, default=0, minimum=0)
    hi = whole(ctx, ds, "max_input_tokens", path, default=None)
    if hi is not None and hi < lo:
        raise ctx.error(f"{path}.max_input_tokens", f"{hi} is below min_input_tokens {lo}")
    return DatasetSpec(path=full, format=fmt, min_input_tokens=lo, max_input_tokens=hi,
                       turns=choice(ctx, ds, "turns", path, ("all", "first"), "all"),
                       limit=whole(ctx, ds, "limit", path, default=None))


def parse_arrival(ctx: Ctx, raw: Any, path: str) -> ArrivalSpec:
    a = keys(ctx, raw, path, ARRIVAL_KEYS)
    mode = choice(ctx, a, "mode", path, ("closed", "open"), "open" if "rate" in a else "closed")
    rate = number(ctx, a, "rate", path, default=None, minimum=0.0, strict=True)
    if mode == "open" and rate is None:
        raise ctx.error(f"{path}.rate", "missing: open-loop arrivals need a rate in requests/s")
    return ArrivalSpec(mode=mode, rate=rate or 0.0,
                       burstiness=number(ctx, a, "burstiness", path, 1.0, 0.0, strict=True),
                       max_in_flight=whole(ctx, a, "max_in_flight", path, default=None))


def parse_slos(ctx: Ctx, raw: Any, path: str, workload: str) -> tuple[SLO, ...]:
    """``slo: {ttft_p95_ms: 2000, ...}``, scoped to the workload."""
    if not isinstance(raw, dict):
        raise ctx.error(path, f"expected a mapping, got {type(raw).__name__}")
    out = []
    for metric, limit in raw.items():
        try:
            slo = parse_slo(f"{metric}={limit}", "slo")
        except ValueError as e:
            raise ctx.error(f"{path}.{metric}", str(e).split(": ", 1)[-1]) from None
        out.append(SLO(slo.metric, slo.limit, workload))
    return tuple(out)


def parse_headers_section(ctx: Ctx, raw: Any, path: str) -> tuple[tuple[str, str], ...]:
    """``headers: {Name: value}``; a value ``env:VAR`` is read from this process's environment."""
    if not isinstance(raw, dict):
        raise ctx.error(path, f"expected a mapping of header names to values, got {type(raw).__name__}")
    out = []
    for name, value in raw.items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ctx.error(f"{path}.{name}", f"expected text, got {value!r}")
        try:
            out.append(parse_header(f"{name}: {value}", "header"))
        except ValueError as e:
            raise ctx.error(f"{path}.{name}", str(e).split(": ", 1)[-1]) from None
    return tuple(out)


def header_secrets(raw: dict) -> tuple[str, ...]:
    """The resolved values of ``headers:`` that are secrets: read from ``env:``, or under a secret's name."""
    out = []
    for name, value in raw.items():
        text = str(value).strip()
        if text.startswith(ENV_PREFIX) or is_secret_name(str(name)):
            try:
                out.append(parse_header(f"{name}: {value}", "header")[1])
            except ValueError:
                continue  # parse_headers_section has already said what is wrong
    return tuple(out)


def parse_workload(ctx: Ctx, name: str, raw: Any, defaults: dict, base_dir: str) -> WorkloadSpec:
    path = f"workloads.{name}"
    raw = keys(ctx, raw if raw is not None else {}, path, WORKLOAD_KEYS)
    endpoint = choice(ctx, {**defaults, **raw}, "endpoint", path, names(STREAM, BODY), "chat")
    d = fitting_defaults(defaults, raw, endpoint)
    body, pipeline = parse_body(ctx, d, raw, path, endpoint, distribution)
    for key in ("sampling", "extra"):
        if key in d and not isinstance(d[key], dict):
            raise ctx.error(f"{path}.{key}", f"expected a mapping, got {type(d[key]).__name__}")
    for key in ("model", "system_prompt"):
        if key in d and d[key] is not None and not isinstance(d[key], str):
            raise ctx.error(f"{path}.{key}", f"expected text, got {d[key]!r}")
    if "ignore_eos" in d and not isinstance(d["ignore_eos"], bool):
        raise ctx.error(f"{path}.ignore_eos", f"expected true or false, got {d['ignore_eos']!r}")
    session = parse_session(ctx, d["session"], f"{path}.session") if "session" in d else None
    agent = session if isinstance(session, AgentSpec) else None
    graph = session if isinstance(session, GraphSpec) else None
    session = session if isinstance(session, SessionSpec) else None
    dataset = parse_dataset(ctx, d["dataset"], f"{path}.dataset", base_dir) if "dataset" in d else None
    arrival = parse_arrival(ctx, d["arrival"], f"{path}.arrival") if "arrival" in d else ArrivalSpec("closed")
    if (session is not None or agent is not None or graph is not None) and arrival.mode == "open":
        raise ctx.error(f"{path}.arrival", "open-loop arrivals and multi-turn sessions do not mix: a session's "
                        "next turn waits for the reply")
    trace = parse_trace_section(ctx, d["trace"], f"{path}.trace", base_dir) if "trace" in d else None
    if "models" in raw and raw.get("model") is not None:  # a model: of the defaults gives way to models:
        raise ctx.error(f"{path}.models", "does not go with model: (one model); list that model in models: instead")
    _check_combinations(ctx, d, path, endpoint, trace is not None, agent is not None or graph is not None)
    inp = distribution(ctx, d, "input_tokens", path)
    out = distribution(ctx, d, "output_tokens", path, minimum=1)
    intended_hit_rate, prefix = hit_rate_prefix(ctx, d, path, inp)
    prime = prefix.get("prime", False) if isinstance(prefix, dict) else False
    if not isinstance(prime, bool):
        raise ctx.error(f"{path}.prefix.prime", f"expected true or false, got {prime!r}")
    given_lengths = dataset is not None or trace is not None
    spec = WorkloadSpec(
        name=name,
        weight=number(ctx, d, "weight", path, default=1.0, strict=True),
        endpoint=endpoint,
        model=d.get("model"),
        system_prompt=d.get("system_prompt"),
        sampling=dict(d.get("sampling") or {}),
        extra=dict(d.get("extra") or {}),
        ignore_eos=bool(d.get("ignore_eos", False)),
        input_tokens=inp if inp is not None or given_lengths else parse_distribution(256, "input_tokens"),
        output_tokens=out if out is not None or given_lengths else parse_distribution(128, "output_tokens"),
        prefix_groups=parse_prefix(ctx, prefix, f"{path}.prefix") if prefix is not None else (),
        intended_hit_rate=intended_hit_rate,
        prefix_prime=prime,
        max_concurrent=whole(ctx, d, "max_concurrent", path, default=None),
        session=session,
        dataset=dataset,
        arrival=arrival,
        slos=parse_slos(ctx, d["slo"], f"{path}.slo", name) if "slo" in d else (),
        headers=parse_headers_section(ctx, d["headers"], f"{path}.headers") if "headers" in d else (),
        header_secrets=header_secrets(d["headers"]) if isinstance(d.get("headers"), dict) else (),
        trace=trace,
        images=parse_images(ctx, d["images"], f"{path}.images") if "images" in d else None,
        agent=agent,
        graph=graph,
        response_format=parse_response_format(ctx, d["response_format"], f"{path}.response_format")
        if "response_format" in d else None,
        body=body,
        pipeline=pipeline,
        models=parse_models(ctx, d["models"], f"{path}.models") if "models" in d else None,
    )
    priority = parse_priority(ctx, d["priority"], f"{path}.priority") if "priority" in d else None
    return with_priority(ctx, path, priority, spec)


def _check_combinations(ctx: Ctx, d: dict, path: str, endpoint: str, trace: bool, agent: bool) -> None:
    """Sections that cannot work together: one message naming the first conflicting key."""
    if trace:
        for key in ("models", "prefix", "prefix_hit_rate", "session", "dataset", "arrival", "input_tokens",
                    "output_tokens"):
            if key in d:
                raise ctx.error(f"{path}.{key}", "does not go with trace: the trace gives the arrival times, the "
                                "lengths and (hash_ids) the shared prefixes; its requests are built before their "
                                "due time, with one model")
    for key in ("dataset", "prefix", "prefix_hit_rate"):
        if agent and key in d:
            raise ctx.error(f"{path}.{key}", "does not go with an agent session: tasks are generated (a shared "
                            "start is the tools and system_prompt)")
    for key, needs in (("images", "image content parts"), ("session", "tool calls")):
        if key in d and endpoint != "chat" and (key == "images" or agent):
            raise ctx.error(f"{path}.{key}", f"{needs} need the chat endpoint, not {endpoint}")
