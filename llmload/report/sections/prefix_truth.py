"""Prefix-cache truth (issue 23): a workload with ``prefix_hit_rate: R`` means R of its prompt tokens
to be a prefix already sent. The report holds that against what the server reported (``cached_tokens``
per request) and warns when they differ by more than ``catalog.INTENDED_HIT_TOLERANCE`` (10 points): the cache was too
small, it evicted, or the router split the prefixes' requests across replicas. Pure.

Usage::

    warnings += check_intended_hits(report.manifest, report.scenarios)   # also fills prefix_cache["intended"]
"""

from __future__ import annotations

from typing import Any

from llmload.metrics.catalog import INTENDED_HIT_TOLERANCE as TOLERANCE


def check_intended_hits(manifest: dict[str, Any] | None, sections: dict[str, Any]) -> list[str]:
    intended = (manifest or {}).get("intended_prefix_hit_rate") or {}
    out = []
    for name, rate in intended.items():
        sec = sections.get(name)
        if sec is None or not sec.prefix_cache:
            continue
        sec.prefix_cache["intended_hit_ratio"] = rate
        got = sec.prefix_cache.get("hit_ratio_tokens")
        if got is not None and abs(got - rate) > TOLERANCE:
            why = ("the cache was too small or evicted prefixes, or the router sent a prefix's requests to "
                   "different replicas" if got < rate else "the workload's prompts share more than it meant")
            out.append(f"{name}: the server reported {got:.0%} of the prompt tokens cached, {rate:.0%} intended "
                       f"(prefix_hit_rate), {abs(got - rate) * 100:.0f} points apart: {why}")
    return out
