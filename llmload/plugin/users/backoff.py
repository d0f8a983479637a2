"""How long a user waits after an overloaded or unreachable server before its next request. Pure.

A closed-loop user that gets 429 or 503 and sends again at once turns a rate-limited run into a
hot loop of instant failures that burns the client and floods the server. So after a 429, a 503
or a connection failure a user waits: ``Retry-After`` when the server gave one (seconds or an
HTTP date, capped at ``max_s``), else exponential backoff with jitter and a cap (the n-th failure
in a row waits a uniform draw in ``[½, 1] × min(max_s, base_s × 2ⁿ⁻¹)``). A success resets the
count. The wait goes into the row of the request that caused it (``backoff_ms``).

Usage::

    policy = BackoffPolicy(base_s=0.5, max_s=60.0)        # BackoffPolicy(enabled=False): never wait
    backoff = Backoff(policy, random.Random(7))
    wait_s = backoff.after(record.status, record.http_status, record.retry_after, time.time())
"""

from __future__ import annotations

import math
import random
from email.utils import parsedate_to_datetime

from llmload.metrics.record import CONNECT_ERROR, RATE_LIMITED
from llmload.plugin.options.option_checks import BackoffPolicy

BACKOFF_HTTP = (429, 503)


def wants_backoff(status: str, http_status: int | None) -> bool:
    """429, 503 and a server that could not be reached: the server asks for less, or is not there."""
    return status in (RATE_LIMITED, CONNECT_ERROR) or http_status in BACKOFF_HTTP


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A ``Retry-After`` value in seconds from ``now`` (Unix seconds): delta-seconds or an
    HTTP date; None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(text).timestamp() - now
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


class Backoff:
    """One user's backoff state: failures in a row, and the wait each one asks for."""

    __slots__ = ("policy", "rng", "failures")

    def __init__(self, policy: BackoffPolicy, rng: random.Random) -> None:
        self.policy = policy
        self.rng = rng
        self.failures = 0

    def after(self, status: str, http_status: int | None, retry_after: str | None, now: float) -> float:
        """Seconds to wait before the next request (0.0 after a success or any other error)."""
        if not wants_backoff(status, http_status):
            self.failures = 0
            return 0.0
        self.failures += 1
        p = self.policy
        if not p.enabled:
            return 0.0
        given = retry_after_seconds(retry_after, now)
        if given is not None:
            return min(given, p.max_s)
        ceiling = min(p.max_s, p.base_s * 2.0 ** min(self.failures - 1, 60))
        return ceiling * (0.5 + 0.5 * self.rng.random())
