"""Numbers and money as the report prints them."""

from __future__ import annotations

import math
from typing import Any


def fmt_usd(v: float | None) -> str:
    """Money with enough decimals to show three significant digits of small amounts."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if v == 0 or abs(v) >= 1:
        return f"{v:,.2f}"
    decimals = max(2, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}"


def money(v: float | None) -> str:
    """Money for a console line: ``$1,460.00``, ``$0.000221``; ``–`` when there is none."""
    text = fmt_usd(v)
    return text if text == "–" else "$" + text


def capacity_text(cap: dict[str, Any]) -> str:
    """A capacity with its unit (``32 users``, ``4 req/s arrivals``), or ``none``."""
    level = cap.get("level", cap.get("users"))
    if level is None:
        return "none"
    return f"{level:g} " + ("req/s arrivals" if cap.get("arrival_rate") is not None else "users")


def fmt(v: Any, nd: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def fmt_pct(v: float | None) -> str:
    """A 0..1 share as a whole percentage (0.818 → "82"): the KV cache reads the same in report and compare."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v * 100:.0f}"
