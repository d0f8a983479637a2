"""The parsers of the production-shaped sections of a workload: ``trace:``, ``images:``, an agent
``session:`` and ``response_format:``. Like :mod:`.sections`, each takes the raw mapping and its
key path and returns a spec, or raises a ScenarioError naming the file, the line and the key.

Usage::

    trace = parse_trace_section(ctx, {"path": "data/traces/mooncake_sample.jsonl"}, "workloads.t.trace", base)
    agent = parse_agent(ctx, {"kind": "agent", "tools": 4, "max_steps": 6}, "workloads.a.session")
"""

from __future__ import annotations

import re
from typing import Any

from llmload.workload.distributions import Distribution, SpecError, parse_distribution
from llmload.workload.file.spec import AgentSpec, ImagesSpec, TraceSpec
from llmload.workload.file.yaml_lines import Ctx, choice, file_section, keys, number, whole
from llmload.workload.tasks.agent import synthetic_tools
from llmload.workload.trace.read import FORMATS as TRACE_FORMATS

TRACE_KEYS = {"path", "format", "time_scale", "start", "duration", "limit", "loop", "models", "log_types",
              "block_tokens", "affinity_header"}
IMAGES_KEYS = {"count", "size", "format", "distinct"}
MAX_IMAGES_PER_REQUEST = 64
MAX_DISTINCT_IMAGES = 1024
AGENT_KEYS = {"kind", "max_steps", "tools", "tool_choice", "tool_result_tokens", "tool_latency_s", "think_time_s"}
RESPONSE_FORMATS = ("json_schema", "json_object", "text")
TOOL_CHOICES = ("auto", "required", "none")
_SIZE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


def _dist(ctx: Ctx, d: dict, key: str, path: str, default: Any, integer: bool) -> Distribution:
    try:
        return parse_distribution(d.get(key, default), f"{path}.{key}", integer=integer, minimum=0)
    except SpecError as e:
        raise ctx.error(e.path, e.message) from None


def _strings(ctx: Ctx, d: dict, key: str, path: str) -> tuple[str, ...]:
    v = d.get(key, [])
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ctx.error(f"{path}.{key}", f"expected a list of names, got {v!r}")
    return tuple(v)


def parse_trace_section(ctx: Ctx, raw: Any, path: str, base_dir: str) -> TraceSpec:
    """``trace: FILE`` or ``trace: {path: FILE, format, time_scale, start, duration, limit, loop}``."""
    t, full = file_section(ctx, raw, path, base_dir, TRACE_KEYS, "trace")
    fmt = t.get("format")
    if fmt is not None and fmt not in TRACE_FORMATS:
        raise ctx.error(f"{path}.format", f"expected {' or '.join(TRACE_FORMATS)}, got {fmt!r}")
    header = t.get("affinity_header", "")  # an agentic trace's session id on every call of the session
    if not isinstance(header, str) or (header and not header.replace("-", "").replace("_", "").isalnum()):
        raise ctx.error(f"{path}.affinity_header", f"expected a header name like x-session-id, got {header!r}")
    return TraceSpec(
        path=full, format=fmt,
        time_scale=number(ctx, t, "time_scale", path, default=1.0, strict=True),
        start=number(ctx, t, "start", path, default=0.0),
        duration=number(ctx, t, "duration", path, default=None, strict=True),
        limit=whole(ctx, t, "limit", path, default=None),
        loop=whole(ctx, t, "loop", path, default=1),
        models=_strings(ctx, t, "models", path),
        log_types=_strings(ctx, t, "log_types", path),
        block_tokens=whole(ctx, t, "block_tokens", path, default=512),
        affinity_header=header,
    )


def parse_images(ctx: Ctx, raw: Any, path: str) -> ImagesSpec:
    """``images: {count: 1, size: 512x512, format: png, distinct: 8}``."""
    m = keys(ctx, raw, path, IMAGES_KEYS)
    size = m.get("size", "512x512")
    match = _SIZE.match(str(size)) if isinstance(size, str) else None
    if match is None:
        raise ctx.error(f"{path}.size", f"expected WIDTHxHEIGHT in pixels, e.g. 512x512, got {size!r}")
    width, height = int(match.group(1)), int(match.group(2))
    if not (1 <= width <= 8192 and 1 <= height <= 8192):
        raise ctx.error(f"{path}.size", f"expected sides of 1..8192 pixels, got {width}x{height}")
    if max(width, height) / min(width, height) > 200:
        raise ctx.error(f"{path}.size", f"{width}x{height}: vision models refuse aspect ratios over 200")
    # every process draws the whole pool of distinct pictures at start: bounded, as is a request's count
    return ImagesSpec(count=whole(ctx, m, "count", path, default=1, maximum=MAX_IMAGES_PER_REQUEST), width=width,
                      height=height, format=choice(ctx, m, "format", path, ("png", "jpeg"), "png"),
                      distinct=whole(ctx, m, "distinct", path, default=8, maximum=MAX_DISTINCT_IMAGES))


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
        name = tool["function"].get("name")
        return name if isinstance(name, str) and name else None
    return None


def parse_agent(ctx: Ctx, raw: Any, path: str) -> AgentSpec:
    """``session: {kind: agent, max_steps, tools, tool_choice, tool_result_tokens, tool_latency_s,
    think_time_s}``; ``tools`` is a count of generated tools or a list of OpenAI tool definitions."""
    a = keys(ctx, raw, path, AGENT_KEYS)
    tools_raw = a.get("tools", 3)
    if isinstance(tools_raw, int) and not isinstance(tools_raw, bool):
        if not 1 <= tools_raw <= 64:
            raise ctx.error(f"{path}.tools", f"expected 1..64 generated tools or a list of tool definitions, "
                            f"got {tools_raw}")
        tools = synthetic_tools(tools_raw)
    elif isinstance(tools_raw, list) and tools_raw:
        for i, tool in enumerate(tools_raw):
            if _tool_name(tool) is None or tool.get("type", "function") != "function":
                raise ctx.error(f"{path}.tools[{i}]", "expected {type: function, function: {name: ..., "
                                "parameters: {...}}}")
        tools = tuple({"type": "function", **tool} for tool in tools_raw)
    else:
        raise ctx.error(f"{path}.tools", f"expected a number of generated tools or a list of tool definitions, "
                        f"got {tools_raw!r}")
    choice_raw = a.get("tool_choice", "auto")
    if isinstance(choice_raw, dict):
        name = _tool_name(choice_raw)
        if name is None or name not in {_tool_name(t) for t in tools}:
            raise ctx.error(f"{path}.tool_choice", f"expected {{type: function, function: {{name: N}}}} naming one "
                            f"of the tools ({', '.join(str(_tool_name(t)) for t in tools)}), got {choice_raw!r}")
        tool_choice: Any = {"type": "function", "function": {"name": name}}
    elif choice_raw in TOOL_CHOICES:
        tool_choice = choice_raw
    else:
        raise ctx.error(f"{path}.tool_choice", f"expected auto, required, none or a named function, "
                        f"got {choice_raw!r}")
    return AgentSpec(
        max_steps=whole(ctx, a, "max_steps", path, default=8),
        tools=tools,
        tool_choice=tool_choice,
        tool_result_tokens=_dist(ctx, a, "tool_result_tokens", path, 200, integer=True),
        tool_latency_s=_dist(ctx, a, "tool_latency_s", path, 0.2, integer=False),
        think_time_s=_dist(ctx, a, "think_time_s", path, 0, integer=False),
    )


def parse_response_format(ctx: Ctx, raw: Any, path: str) -> dict[str, Any]:
    """``response_format: {type: json_schema, json_schema: {name, schema}}`` (or ``json_object``),
    sent as is."""
    r = keys(ctx, raw, path, {"type", "json_schema"})
    kind = choice(ctx, r, "type", path, RESPONSE_FORMATS, "json_schema")
    if kind == "json_schema":
        js = r.get("json_schema")
        if not isinstance(js, dict) or not isinstance(js.get("schema", {}), dict):
            raise ctx.error(f"{path}.json_schema", "expected {name: ..., schema: {type: object, properties: "
                            "{...}}}")
        return {"type": kind, "json_schema": {"name": str(js.get("name", "reply")), **js}}
    if "json_schema" in r:
        raise ctx.error(f"{path}.json_schema", f"only with type: json_schema, not {kind}")
    return {"type": kind}
