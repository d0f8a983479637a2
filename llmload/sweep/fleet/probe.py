"""The routing check before a fleet's first step: requests through the router until each replica
has answered one (each response names the replica that served it), bounded. I/O.

Probes go in waves of K at once, each with its own affinity key, so that every policy spreads
them: round-robin and random by themselves, least-connections because K are in flight together,
hash and session affinity because the keys differ. Only a 200 counts as an answer.

Usage::

    seen = check_routing("http://127.0.0.1:9000", "tiny", replica_of, replicas=2, api_key=None)
    seen.reached     # {0: 5, 1: 3}: 200s per replica
    seen.problem()   # None, or the one line saying which replica did not answer through the router
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from llmload.workload.affinity import PREFIX_HEADER, SESSION_HEADER

WAVES = 12  # of K probes each: a replica that a random router misses 12 × K times in a row is a 1-in-e^12 event
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to 127.0.0.1, no proxy


@dataclass
class RoutingCheck:
    replicas: int
    router: str
    reached: dict[int, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)  # "replica 1: HTTP 500" / "router: HTTP 502" → count
    sent: int = 0

    def problem(self, urls: list[str]) -> str | None:
        missing = [i for i in range(self.replicas) if not self.reached.get(i)]
        if not missing:
            return None
        why = "; ".join(f"{k} ×{n}" for k, n in sorted(self.failures.items())) or "none failed"
        names = ", ".join(f"replica {i} ({urls[i]})" for i in missing)
        return (f"{names} did not answer through {self.router}: {self.sent} requests through it reached "
                f"{dict(sorted(self.reached.items())) or 'no replica'} (failures: {why})")


def _one(url: str, model: str, n: int, api_key: str | None, timeout_s: float) -> tuple[int, dict[str, str], str]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "llmload routing check"}],
                       "max_tokens": 1}).encode()
    headers = {"Content-Type": "application/json", SESSION_HEADER: f"session-probe-{n:04d}",
               PREFIX_HEADER: f"prefix-probe-{n:04d}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(req, timeout=timeout_s) as r:
            r.read()
            return r.status, {k.lower(): v for k, v in r.headers.items()}, ""
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, f"HTTP {e.code}"
    except (OSError, ValueError) as e:
        return 0, {}, f"{type(e).__name__}: {e}"


def check_routing(url: str, model: str, replica_of: Callable[[dict[str, str]], int | None], replicas: int,
                  router: str, api_key: str | None = None, timeout_s: float = 30.0) -> RoutingCheck:
    """Send waves of ``replicas`` probes until every replica answered one, at most WAVES waves."""
    check = RoutingCheck(replicas, router)
    with ThreadPoolExecutor(max_workers=replicas) as pool:
        for wave in range(WAVES):
            numbers = range(wave * replicas, (wave + 1) * replicas)
            for status, headers, error in pool.map(lambda n: _one(url, model, n, api_key, timeout_s), numbers):
                check.sent += 1
                who = replica_of(headers)
                if status == 200 and who is not None:
                    check.reached[who] = check.reached.get(who, 0) + 1
                else:
                    key = f"replica {who}: {error or status}" if who is not None else f"{router}: {error or status}"
                    check.failures[key] = check.failures.get(key, 0) + 1
            if len(check.reached) == replicas:
                break
    return check
