"""A sweep plan file → a frozen :class:`Plan`. Pure: text in, dataclasses out; every error names
``file:line: key.path: what was expected`` (the scenario file's checks, reused).

Usage::

    plan = parse_plan(open("sweep.yaml").read(), "sweep.yaml")
    plan.deployments[0].serve      # "python -m llmload.cli mock --port {port} --max-num-seqs {max_num_seqs}"

The format (docs/sweep.md has it in full)::

    slo: [ttft_p95_ms=2000, tpot_p95_ms=60]      # or {ttft_p95_ms: 2000}; the --slo syntax
    target_rps: 20                               # or target_users: 200
    headroom: 0.3
    deployments:
      small: {serve: "vllm serve M --port {port} --max-num-seqs {max_num_seqs}", gpus: 1, gpu_hourly_usd: 2.0}
      remote: {host: "http://10.0.0.5:8000", tp: 2, gpu_hourly_usd: 4.0}
    params: {max_num_seqs: [64, 128]}            # a matrix filled into every serve: template that names it
    workloads: {chat: {input_tokens: 512, output_tokens: 128}, rag: {scenario: scenarios/rag.yaml}}
    load: {steps: [8, 16, 32], step_seconds: 30, warmup_s: 5, step_precision: 5}   # step_precision: optional
    repeats: 1
    reset: none                                  # vllm, sglang, none, or {command: "..."}
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass, field
from typing import Any

from llmload.metrics.slo import SLO, parse_slo
from llmload.sweep.plan_fleet import FLEET_KEYS, Fleet, parse_fleet
from llmload.workload.file.spec import ScenarioError
from llmload.workload.file.yaml_lines import Ctx, compose, keys, number, whole

TOP_KEYS = {"slo", "target_rps", "target_users", "headroom", "deployments", "params", "workloads", "load",
            "repeats", "reset", "usd_per_kwh"}
DEPLOYMENT_KEYS = {"host", "serve", "env", "health", "start_timeout_s", "gpus", "tp", "pp", "dp", "gpu_hourly_usd",
                   "gpu_metrics"} | FLEET_KEYS
WORKLOAD_KEYS = {"scenario", "input_tokens", "output_tokens"}
LOAD_KEYS = {"steps", "step_seconds", "warmup_s", "step_precision"}
RESETS = ("none", "vllm", "sglang")
HEALTH_PATHS = ("/health", "/v1/models")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # names become folder names: keep them plain


class PlanError(ScenarioError):
    """A plan file that cannot be run; the message names file, line, key and the fix."""


@dataclass(frozen=True)
class Deployment:
    name: str
    gpus: int
    gpu_hourly_usd: float
    host: str | None = None  # a running server, or
    serve: str | None = None  # a command template ({port} and the params' names filled in)
    env: dict[str, str] = field(default_factory=dict)
    health: str = "/health"
    start_timeout_s: float = 300.0
    gpu_metrics: tuple[str, ...] = ()  # DCGM exporter URLs ({port}: the cell's server port), --gpu-metrics
    fleet: Fleet | None = None  # replicas: K copies of serve: behind a router (llmload.sweep.plan_fleet)

    def gpu_metrics_urls(self, server_url: str) -> list[str]:
        """The exporters to read for a cell whose server is at ``server_url``."""
        port = server_url.rsplit(":", 1)[-1].split("/")[0]
        return [u.replace("{port}", port) for u in self.gpu_metrics]

    def placeholders(self) -> set[str]:
        """The ``{names}`` its serve: template uses."""
        if not self.serve:
            return set()
        return {f for _, f, _, _ in string.Formatter().parse(self.serve) if f}


@dataclass(frozen=True)
class Workload:
    name: str
    scenario: str | None = None  # a scenario file (absolute), or
    input_tokens: str | None = None  # ISL/OSL, as --input-tokens / --output-tokens
    output_tokens: str | None = None

    def locust_args(self) -> list[str]:
        if self.scenario:
            return ["--scenario", self.scenario]
        return ["--input-tokens", str(self.input_tokens), "--output-tokens", str(self.output_tokens), "--ignore-eos"]


@dataclass(frozen=True)
class Load:
    steps: tuple[int, ...]
    step_seconds: float  # with step_precision: the cap
    warmup_s: float = 5.0
    step_precision: float = 0.0  # > 0: a step ends once its SLO percentiles are known to this % (--step-precision)


@dataclass(frozen=True)
class Plan:
    path: str
    slos: tuple[SLO, ...]
    deployments: tuple[Deployment, ...]
    workloads: tuple[Workload, ...]
    load: Load
    params: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    target_rps: float | None = None
    target_users: float | None = None
    headroom: float = 0.3
    repeats: int = 1
    reset: str = "none"  # none, vllm, sglang
    reset_command: str | None = None
    usd_per_kwh: float | None = None  # prices the GPUs' energy (deployments with gpu_metrics:)


def read_plan(path: str) -> Plan:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read((4 << 20) + 1)
    except OSError as e:
        raise PlanError(f"{path}: cannot read the plan: {e.strerror or e}") from None
    return parse_plan(text, path)


def parse_plan(text: str, path: str) -> Plan:
    """Check every key; raise :class:`PlanError` at the first that is wrong."""
    try:
        return _parse(text, path)
    except PlanError:
        raise
    except ScenarioError as e:  # the shared checks speak of scenario files
        raise PlanError(str(e).replace("a scenario file", "a plan file")) from None


def _parse(text: str, path: str) -> Plan:
    try:
        raw, ctx = compose(text, path)
    except ScenarioError as e:
        raise PlanError(str(e).replace("a scenario file", "a plan file")) from None
    keys(ctx, raw, "", TOP_KEYS)
    for need in ("deployments", "workloads", "load"):
        if need not in raw:
            raise PlanError(f"{path}: {need}: missing; a plan needs deployments:, workloads: and load:")
    if "target_rps" in raw and "target_users" in raw:
        raise ctx.error("target_users", "give target_rps or target_users, not both")
    base = os.path.dirname(os.path.abspath(path))
    params = _params(ctx, raw.get("params") or {})
    deployments = _deployments(ctx, raw["deployments"])
    used = set().union(*(d.placeholders() for d in deployments))
    for name in params:
        if name not in used:
            raise ctx.error(f"params.{name}", f"no serve: template uses {{{name}}}; add it to a command or drop "
                                              "the parameter")
    for d in deployments:
        unknown = d.placeholders() - set(params) - {"port", "replica"}
        if unknown:
            raise ctx.error(f"deployments.{d.name}.serve", f"{{{sorted(unknown)[0]}}} is not filled in: add it "
                                                           "under params: (or write {port}, or {replica}: the "
                                                           "replica's index in a fleet)")
    headroom = number(ctx, raw, "headroom", "", 0.3)
    if not headroom < 1:
        raise ctx.error("headroom", f"expected a fraction in [0, 1), e.g. 0.3, got {headroom:g}")
    reset, reset_command = _reset(ctx, raw.get("reset", "none"))
    return Plan(path=path, slos=tuple(_slos(ctx, raw.get("slo") or [])), deployments=tuple(deployments),
                workloads=tuple(_workloads(ctx, raw["workloads"], base)), load=_load(ctx, raw["load"]),
                params=params, target_rps=number(ctx, raw, "target_rps", "", None, strict=True),
                target_users=number(ctx, raw, "target_users", "", None, strict=True), headroom=headroom,
                repeats=whole(ctx, raw, "repeats", "", 1, maximum=100), reset=reset, reset_command=reset_command,
                usd_per_kwh=number(ctx, raw, "usd_per_kwh", "", None))


def _slos(ctx: Ctx, raw: Any) -> list[SLO]:
    items = [f"{k}={v}" for k, v in raw.items()] if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ctx.error("slo", f"expected a list like [ttft_p95_ms=2000] or a mapping, got {type(raw).__name__}")
    out = []
    for i, text in enumerate(items):
        try:
            out.append(parse_slo(str(text)))
        except ValueError as e:
            raise ctx.error(f"slo[{i}]" if isinstance(raw, list) else "slo", str(e)) from None
    return out


def _names(ctx: Ctx, raw: Any, key: str) -> dict[str, Any]:
    if isinstance(raw, list):  # [{name: x, ...}] is accepted too
        named = {}
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or "name" not in item:
                raise ctx.error(f"{key}[{i}]", "expected a mapping with name:")
            named[str(item["name"])] = {k: v for k, v in item.items() if k != "name"}
        raw = named
    if not isinstance(raw, dict) or not raw:
        raise ctx.error(key, "expected a mapping of names to entries, with at least one entry")
    for name in raw:
        if not NAME.match(name):
            raise ctx.error(f"{key}.{name}", "a name of letters, digits, '.', '_' or '-' (it becomes a folder name)")
    return raw


def _deployments(ctx: Ctx, raw: Any) -> list[Deployment]:
    out = []
    for name, d in _names(ctx, raw, "deployments").items():
        p = f"deployments.{name}"
        keys(ctx, d, p, DEPLOYMENT_KEYS)
        if ("host" in d) == ("serve" in d):
            raise ctx.error(p, "give host: (a running server) or serve: (a command template with {port}), one of them")
        for k in ("host", "serve"):
            if k in d and not (isinstance(d[k], str) and d[k].strip()):
                raise ctx.error(f"{p}.{k}", f"expected text, got {d[k]!r}")
        if "serve" in d and "{port}" not in d["serve"]:
            raise ctx.error(f"{p}.serve", "the command must contain {port}: the sweep picks a free port per cell")
        if "gpus" in d and any(k in d for k in ("tp", "pp", "dp")):
            raise ctx.error(f"{p}.gpus", "give gpus: or tp/pp/dp (gpus = tp × pp × dp), not both")
        gpus = whole(ctx, d, "gpus", p, None, maximum=4096)
        if gpus is None:
            gpus = whole(ctx, d, "tp", p, 1, maximum=512) * whole(ctx, d, "pp", p, 1, maximum=512) * \
                whole(ctx, d, "dp", p, 1, maximum=512)
        if "gpu_hourly_usd" not in d:
            raise ctx.error(f"{p}.gpu_hourly_usd", "missing: the price of one GPU-hour (0 for a machine you own)")
        env = d.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str | int | float) for v in env.values()):
            raise ctx.error(f"{p}.env", "expected a mapping of NAME: value")
        gpu_metrics = d.get("gpu_metrics") or []
        gpu_metrics = [gpu_metrics] if isinstance(gpu_metrics, str) else gpu_metrics
        if not isinstance(gpu_metrics, list) or not all(isinstance(u, str) and u.startswith(("http://", "https://"))
                                                        for u in gpu_metrics):
            raise ctx.error(f"{p}.gpu_metrics", "expected the URL (or a list of URLs) of a DCGM exporter's metrics, "
                                                "e.g. http://gpu-node:9400/metrics ({port}: the cell's server port)")
        if gpu_metrics and "replicas" in d:
            raise ctx.error(f"{p}.gpu_metrics", "not read for a fleet (replicas:) yet: give it to a one-server "
                                                "deployment")
        health = d.get("health", "/health")
        if health not in HEALTH_PATHS:
            raise ctx.error(f"{p}.health", f"expected {' or '.join(HEALTH_PATHS)}, got {health!r}")
        out.append(Deployment(name=name, gpus=gpus, gpu_hourly_usd=number(ctx, d, "gpu_hourly_usd", p),
                              host=d.get("host"), serve=d.get("serve"), env={k: str(v) for k, v in env.items()},
                              health=health, start_timeout_s=number(ctx, d, "start_timeout_s", p, 300.0,
                                                                    strict=True), gpu_metrics=tuple(gpu_metrics),
                              fleet=parse_fleet(ctx, d, p)))
    return out


def _params(ctx: Ctx, raw: Any) -> dict[str, tuple[Any, ...]]:
    keys(ctx, raw, "params", set(raw) if isinstance(raw, dict) else set())
    out = {}
    for name, values in raw.items():
        values = values if isinstance(values, list) else [values]
        if not values or not all(isinstance(v, str | int | float) for v in values):
            raise ctx.error(f"params.{name}", "expected a list of values, e.g. [64, 128]")
        if not name.isidentifier():
            raise ctx.error(f"params.{name}", "a parameter name is a word of letters, digits and _")
        out[name] = tuple(values)
    return out


def _workloads(ctx: Ctx, raw: Any, base: str) -> list[Workload]:
    out = []
    for name, w in _names(ctx, raw, "workloads").items():
        p = f"workloads.{name}"
        if isinstance(w, str):
            w = {"scenario": w}
        keys(ctx, w, p, WORKLOAD_KEYS)
        if "scenario" in w:
            if "input_tokens" in w or "output_tokens" in w:
                raise ctx.error(p, "give scenario: or input_tokens/output_tokens, not both")
            full = w["scenario"] if os.path.isabs(str(w["scenario"])) else os.path.join(base, str(w["scenario"]))
            if not os.path.isfile(full):
                raise ctx.error(f"{p}.scenario", f"no such file {full}")
            out.append(Workload(name=name, scenario=full))
            continue
        for k in ("input_tokens", "output_tokens"):
            v = w.get(k)
            if v is None or isinstance(v, bool) or not re.fullmatch(r"[1-9]\d*(-[1-9]\d*)?", str(v)):
                raise ctx.error(f"{p}.{k}", f"expected a token count N or LOW-HIGH, got {v!r}")
        out.append(Workload(name=name, input_tokens=str(w["input_tokens"]), output_tokens=str(w["output_tokens"])))
    return out


def _load(ctx: Ctx, raw: Any) -> Load:
    keys(ctx, raw, "load", LOAD_KEYS)
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 < s <= 100_000 for s in steps):
        raise ctx.error("load.steps", f"expected a list of user counts, e.g. [8, 16, 32], got {steps!r}")
    if "step_seconds" not in raw:
        raise ctx.error("load.step_seconds", "missing: the seconds each step lasts")
    step_s = number(ctx, raw, "step_seconds", "load", strict=True)
    warmup = number(ctx, raw, "warmup_s", "load", 5.0)
    if warmup >= step_s:
        raise ctx.error("load.warmup_s", f"{warmup:g} s of warm-up leaves nothing of a {step_s:g} s step to "
                                         "measure: make steps longer or the warm-up shorter")
    precision = number(ctx, raw, "step_precision", "load", 0.0)
    if precision < 0 or precision >= 100:
        raise ctx.error("load.step_precision", f"expected a percentage in (0, 100), e.g. 5, got {precision:g}")
    return Load(steps=tuple(steps), step_seconds=step_s, warmup_s=warmup, step_precision=precision)


def _reset(ctx: Ctx, raw: Any) -> tuple[str, str | None]:
    if isinstance(raw, dict):
        keys(ctx, raw, "reset", {"command"})
        if not isinstance(raw.get("command"), str) or not raw["command"].strip():
            raise ctx.error("reset.command", "expected a command to run before each cell")
        return "command", raw["command"]
    if raw not in RESETS:
        raise ctx.error("reset", f"expected {', '.join(RESETS)} or {{command: ...}}, got {raw!r}")
    return raw, None
