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
