"""Which of the client's requests a server delta covers, and their numbers beside the server's. Pure.

A server histogram's delta between two scrapes holds the observations the engine made between
them: vLLM, SGLang and TensorRT-LLM observe a request's TTFT when its first token leaves the
engine, and its E2E when it finishes. So the client's side of a comparison is the rows whose
**first token** (TTFT) or **end** (E2E) reached the client between the same two scrapes, whatever
step or phase they started in; not the rows that started in the step's window. Those two sets
differ by the requests in flight at each edge: a burst queued across a step's warm-up made a real
vLLM look 181 ms slower than the client on the same run, which no request can be (the server's
clock starts after the client's and stops before it).

The scrape time is when the client asked (the tick); the engine wrote its exposition within
that scrape's duration after it, so each edge is known to within its scrape's duration
(``resolution_ms``). And the engine saw a request's first token somewhere between the client's
start and the client's read of it. So a request whose span from its start to its first token (or
end) reaches across an edge may fall on either side of it for the server: ``straddling`` counts
them, and the server's count lies within ``[n − straddling.first, n + straddling.last]``, whatever
the client's own delays (a busy client reads late; it cannot read before the engine sent).

Usage::

    side = client_between(rows, first_scrape, last_scrape, "ttft", resolution_s=0.004)
    side.n, side.mean, side.p50, side.p95        # rows: start_time, ttft_ms, e2e_ms, ok
    side.straddle_first, side.straddle_last      # the server may count n − first … n + last
    gaps(side, server_mean=412.0, server_pcts={"p50": 380.0, "p95": 700.0})   # client − server
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

JOIN_COLUMNS = ("start_time", "ttft_ms", "e2e_ms", "ok")
"""What a row needs for the join; the report keeps these of its warm-up rows too."""


@dataclass(frozen=True, slots=True)
class ClientSide:
    """The client's numbers over the requests a server delta covers (ms)."""

    n: int
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    straddle_first: int = 0
    """Of the ``n``, those that started before the first scrape's edge (plus its resolution):
    the engine may have counted them before it."""
    straddle_last: int = 0
    """Not of the ``n`` (their first token or end came after the last scrape), yet started before
    its edge (plus its resolution): the engine may have counted them inside."""

    def counts_json(self, server: float | None) -> dict[str, object]:
        return {"server": server, "client": self.n,
                "straddling": {"first": self.straddle_first, "last": self.straddle_last}}

    def to_json(self) -> dict[str, float | None]:
        return {"p50": _r(self.p50), "p95": _r(self.p95), "mean": _r(self.mean)}


def join_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The :data:`JOIN_COLUMNS` of request rows (``ok`` from ``status`` when it is not there yet)."""
    nan = np.full(len(df), np.nan)
    ok = df["ok"] if "ok" in df.columns else df["status"] == "ok"
    return pd.DataFrame({"start_time": df["start_time"].to_numpy(dtype=float),
                         "ttft_ms": df["ttft_ms"].to_numpy(dtype=float) if "ttft_ms" in df.columns else nan,
                         "e2e_ms": df["e2e_ms"].to_numpy(dtype=float) if "e2e_ms" in df.columns else nan,
                         "ok": ok.to_numpy(dtype=bool)})


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def client_between(rows: pd.DataFrame, lo: float, hi: float, metric: str, resolution_s: float = 0.0) -> ClientSide:
    """The rows whose first token (``metric="ttft"``: any status, the server saw the token) or
    whose end (``"e2e"``: ok rows, which the server finished) fell in ``(lo, hi]``, epoch seconds;
    ``resolution_s``: how long after each scrape's time the engine may have answered it."""
    start = rows["start_time"].to_numpy(dtype=float)
    if metric == "ttft":
        values = rows["ttft_ms"].to_numpy(dtype=float)
        known = ~np.isnan(values)
    elif metric == "e2e":
        values = rows["e2e_ms"].to_numpy(dtype=float)
        known = ~np.isnan(values) & rows["ok"].to_numpy(dtype=bool)
    else:
        raise ValueError(f"metric {metric!r}: expected 'ttft' or 'e2e'")
    at = start + np.nan_to_num(values) / 1000.0
    inside = known & (at > lo) & (at <= hi)
    picked = values[inside]
    first = int((inside & (start < lo + resolution_s)).sum())
    last = int((known & (at > hi) & (start < hi + resolution_s)).sum())
    if not len(picked):
        return ClientSide(0, straddle_last=last)
    p50, p95 = np.percentile(picked, [50, 95])
    return ClientSide(len(picked), float(picked.mean()), float(p50), float(p95), first, last)


def gaps(side: ClientSide, server_mean: float | None,
         server_pcts: dict[str, float | None] | None) -> dict[str, float] | None:
    """Client − server on the mean (exact on both sides) and on p50/p95 (the server's interpolated
    inside its buckets: coarse); None when neither side has a number."""
    out: dict[str, float] = {}
    if side.mean is not None and server_mean is not None:
        out["mean"] = round(side.mean - server_mean, 3)
    for q in ("p50", "p95"):
        mine, theirs = getattr(side, q), (server_pcts or {}).get(q)
        if mine is not None and theirs is not None:
            out[q] = round(mine - theirs, 3)
    return out or None
