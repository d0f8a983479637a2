"""Hand-made PREFIX_requests.csv rows for report tests."""

from __future__ import annotations

from llmload.metrics.record import CSV_COLUMNS


def write_csv(path, rows: list[dict]) -> str:
    with open(path, "w") as f:
        f.write(",".join(CSV_COLUMNS) + "\n")
        for r in rows:
            f.write(",".join("" if r.get(c) is None else str(r[c]) for c in CSV_COLUMNS) + "\n")
    return str(path)[: -len("_requests.csv")]


def req(start, users, ttft=100.0, tpot=10.0, e2e=1000.0, status="ok", tokens=91, prompt=100, scenario="chat",
        cached=None):
    return {"request_id": f"r{start}", "start_time": start, "scenario": scenario, "status": status,
            "http_status": 200, "ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": e2e, "itl_max_ms": tpot * 2,
            "prompt_tokens": prompt, "completion_tokens": tokens, "cached_tokens": cached, "users": users,
            "token_source": "usage"}


def ladder(levels_seconds, ttft=None, prompt=100, start=1000.0):
    """Closed-loop steps, each (users, seconds): one 1-second request per user per second, starts
    evenly spread (users req/s). ``ttft`` maps users → TTFT (default 100 ms)."""
    rows, t = [], start
    for users, seconds in levels_seconds:
        n = int(users * seconds)
        rows += [req(t + i / users, users, ttft=(ttft or {}).get(users, 100.0), prompt=prompt) for i in range(n)]
        t += seconds
    return rows
