"""``priority:`` of a workload: the class its requests belong to and how the server is told.

Two ways to tell the server, one per serving stack:

* **body** (the default): vLLM's request field ``priority``, an integer; with vLLM's
  ``--scheduling-policy priority`` a *lower* value is served first (ties by arrival), and the
  lowest-priority running request is preempted when the batch runs out of KV cache::

      priority: {class: interactive, value: 0}
      priority: {class: batch, value: 10}

* **header**: a gateway reads the class from a header; the Gateway API inference extension's
  endpoint picker reads ``x-gateway-inference-objective`` (the name of an InferenceObjective, whose
  own ``priority`` there is *higher first*, negative ones shed when the pool is saturated)::

      priority: {class: batch, header: x-gateway-inference-objective, value: batch-objective}

``class`` names the class in every output (the ``priority`` column of PREFIX_requests.csv, the
report's per-class section); ``rank`` orders the classes for ``--isolation`` and the report (0 the
most urgent; default: a body ``value`` itself, else 0). A plain ``priority: NAME`` is a class with
no value sent (a label for the report only).

Usage::

    spec = parse_priority(ctx, {"class": "high", "value": 0}, "workloads.chat.priority")
    spec.body_fields()      # {"priority": 0}
    spec.header_pairs()     # ()
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from llmload.workload.file.spec import BODY_PRIORITY_FIELD, PrioritySpec, WorkloadSpec
from llmload.workload.file.yaml_lines import Ctx, keys

PRIORITY_KEYS = {"class", "value", "header", "rank"}
BODY_FIELD = BODY_PRIORITY_FIELD
GATEWAY_HEADER = "x-gateway-inference-objective"  # the Gateway API inference extension's objective header
_CLASS_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token


def parse_priority(ctx: Ctx, raw: Any, path: str) -> PrioritySpec:
    """``priority: NAME`` or ``priority: {class, value, header, rank}``; errors name the key and the fix."""
    if isinstance(raw, str):
        raw = {"class": raw}
    p = keys(ctx, raw, path, PRIORITY_KEYS)
    name = p.get("class")
    if not isinstance(name, str) or not _CLASS_NAME.match(name):
        raise ctx.error(f"{path}.class", f"expected a class name (letters, digits, _ . -; up to 64), got {name!r}")
    header = p.get("header")
    value = p.get("value")
    if header is not None:
        if not isinstance(header, str) or not _HEADER_NAME.match(header):
            raise ctx.error(f"{path}.header", f"expected a header name such as {GATEWAY_HEADER}, got {header!r}")
        if value is None:
            raise ctx.error(f"{path}.value", f"missing: the value to send in the {header} header")
        if isinstance(value, bool) or not isinstance(value, str | int) or "\n" in str(value) or "\r" in str(value):
            raise ctx.error(f"{path}.value", f"expected text or a whole number for the {header} header, got {value!r}")
    elif value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ctx.error(f"{path}.value", f"expected a whole number (vLLM's body priority: lower is served first), "
                        f"got {value!r}; a text value needs header: NAME")
    rank = p.get("rank", value if header is None and isinstance(value, int) else 0)
    if isinstance(rank, bool) or not isinstance(rank, int | float):
        raise ctx.error(f"{path}.rank", f"expected a number (0: the most urgent class), got {rank!r}")
    return PrioritySpec(name=name, value=value, header=header, rank=float(rank))


def with_priority(ctx: Ctx, path: str, priority: PrioritySpec | None, spec: WorkloadSpec) -> WorkloadSpec:
    """``spec`` with its priority class, the value put where it is sent: the body's ``extra`` or ``headers``."""
    if priority is None:
        return spec
    if BODY_FIELD in spec.extra and priority.body_fields():
        raise ctx.error(f"{path}.extra.{BODY_FIELD}", "is set by priority: (its value is the body's priority); "
                        "leave it out of extra")
    taken = {name.lower() for name, _ in spec.headers}
    for name, _ in priority.header_pairs():
        if name.lower() in taken:
            raise ctx.error(f"{path}.headers.{name}", "is set by priority: (its header); leave it out of headers")
    return dataclasses.replace(spec, priority=priority, extra={**spec.extra, **priority.body_fields()},
                               headers=spec.headers + priority.header_pairs())
