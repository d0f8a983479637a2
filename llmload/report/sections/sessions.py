"""Call-graph sessions in the report (issue 23): per scenario, over the sessions whose calls all
ended, the makespan (first call's start to the last call's end), the critical path (the chain that
ends last, stepping back each time to the parent that ended last) with its share of model time,
the calls and tokens per session, the share of prompt tokens the server reported cached, and TTFT
of calls that hit the cache against those that did not. Pure: a DataFrame of request rows in.

Usage::

    graph_sessions(df)   # None when the run has no call-graph rows
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _pcts(v: np.ndarray) -> dict[str, float] | None:
    if not len(v):
        return None
    p50, p95, p99 = np.percentile(v, [50, 95, 99])
    return {"p50": round(float(p50), 3), "p95": round(float(p95), 3), "p99": round(float(p99), 3)}


def critical_path(calls: pd.DataFrame) -> tuple[float, float, int]:
    """One session's (makespan s, model seconds on the critical path, calls on it), from its rows
    (``call_id``, ``call_after``, ``start_time``, ``end_time``, ``e2e_ms``)."""
    end = dict(zip(calls["call_id"], calls["end_time"], strict=True))
    after = {c: [p for p in str(a).split("+") if p in end] if isinstance(a, str) and a else []
             for c, a in zip(calls["call_id"], calls["call_after"], strict=True)}
    model = dict(zip(calls["call_id"], calls["e2e_ms"].fillna(0.0) / 1000.0, strict=True))
    node: str | None = max(end, key=end.get)
    on_path, n = 0.0, 0
    while node is not None:
        on_path += model[node]
        n += 1
        parents = after[node]
        node = max(parents, key=end.get) if parents else None
    makespan = float(calls["end_time"].max() - calls["start_time"].min())
    return makespan, on_path, n


def graph_sessions(df: pd.DataFrame) -> dict[str, Any] | None:
    if "call_id" not in df.columns or not df["call_id"].notna().any():
        return None
    rows = df[df["call_id"].notna() & (df["call_id"].astype(str) != "")]
    cancelled = rows.groupby("session_id")["status"].apply(lambda s: (s.astype(str) == "cancelled").any())
    rows = rows[~rows["session_id"].isin(cancelled[cancelled].index)]  # cut off by the end of the test
    if rows.empty:
        return None
    spans, shares, path_calls = [], [], []
    for _sid, calls in rows.groupby("session_id", sort=False):
        makespan, on_path, n = critical_path(calls)
        spans.append(makespan)
        shares.append(on_path / makespan if makespan > 0 else 1.0)
        path_calls.append(n)
    ok = rows[rows["ok"]]
    prompt = float(ok["prompt_tokens"].sum()) if "prompt_tokens" in ok else 0.0
    cached_tokens = ok["cached_tokens"].fillna(0) if "cached_tokens" in ok else pd.Series(0, index=ok.index)
    hit = ok[cached_tokens > 0]
    miss = ok[cached_tokens <= 0]
    n = len(spans)
    return {
        "sessions": n,
        "makespan_s": _pcts(np.array(spans)),
        "critical_path_model_share": round(float(np.mean(shares)), 4),
        "critical_path_calls": round(float(np.mean(path_calls)), 2),
        "calls_per_session": round(len(rows) / n, 2),
        "tokens_per_session": {"prompt": round(prompt / n, 1),
                               "completion": round(float(ok["completion_tokens"].sum()) / n, 1)},
        "cached_share": round(float(cached_tokens.sum()) / prompt, 4) if prompt else None,
        "ttft_ms": {"cached": _pcts(hit["ttft_ms"].dropna().to_numpy(dtype=float)),
                    "uncached": _pcts(miss["ttft_ms"].dropna().to_numpy(dtype=float))},
    }
