"""Drive the mock's pure engine on a fake clock."""

from __future__ import annotations


def words(n: int, tag: str = "w") -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


def run_until_idle(engine, now: float = 0.0, limit: int = 100_000):
    """Advance a fake clock through every event; returns all emissions."""
    out = []
    for _ in range(limit):
        t = engine.next_event_time()
        if t is None:
            return out
        now = max(now, t)
        out += engine.advance(now)
    raise AssertionError("engine did not go idle")
