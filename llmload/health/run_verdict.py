"""The client's verdict over a run, in one line: did the load generator limit the run, did its
event loop stall, and did any stall touch a request's timings. Pure.

The end-of-run summary and the live dashboard's badge both call :func:`client_line` over the same
intervals (:class:`ClientRun`, kept by the live history), so the two always say the same. Each
limited interval gives its reason (:func:`llmload.health.verdict.describe` without the action); each
action (:data:`llmload.health.verdict.ACTION`) is said once. The details (every limited interval,
the stalls by length, CPU and cause, the collector's passes) are :func:`client_details`, for
``PREFIX_run.json`` and ``--verbose``.

Usage::

    run = ClientRun(interval_s=2.0)
    run.judge(at_s=42.0, limited=[sample], errors_dominate=False)   # every history sample
    print(client_line(run, stalls=view.stalls, timing=view.timing))
    # "client: not limited (...). 3 event-loop stalls over 2 ms (longest 7.1 ms, mostly gc gen 2); no
    #  request's timing was affected (every read carries the kernel's receive time)"
    client_details(run, view.stalls, view.timing)   # {"verdict": ..., "limited_intervals": [...], "stalls": {...}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmload.health.stalls import STALL_MS, StallStats, describe_stalls
from llmload.health.verdict import ACTION, describe


def new_timing() -> dict[str, int]:
    """Finished requests, and those whose timings a slow client can have touched: ``coalesced``
    (a read carried several of their events: the gaps into and inside it are unknown and left out,
    and a first token read together with the next carries the later one's time) and
    ``clock_in_stall`` (timed by the clock after each read, not by the kernel, while the loop
    stalled: such a read is late by up to the stall). A request stamped by the kernel is untouched
    by a stall: its events carry the times they reached the machine."""
    return {"requests": 0, "coalesced": 0, "clock_in_stall": 0}


def add_timing(into: dict[str, int], other: dict[str, Any] | None) -> None:
    for k in into:
        into[k] += int((other or {}).get(k) or 0)


def clock(seconds: float) -> str:
    """m:ss into the run (h:mm:ss past an hour), as the dashboard's time axis."""
    s = max(0, round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


@dataclass
class ClientRun:
    """The client's judged intervals so far: the limited ones (each as text), their causes, and
    the intervals in which errors dominated (the client is not judged in those)."""

    interval_s: float
    limited: list[str] = field(default_factory=list)
    """One text per limited interval: ``at 0:42: worker 0: CPU 97 %, ...; this process is busy (...)``."""
    causes: dict[str, int] = field(default_factory=dict)
    """health.verdict's cause → limited intervals."""
    errors: list[str] = field(default_factory=list)
    """One text per interval in which errors dominated."""
    intervals: int = 0

    def judge(self, at_s: float, limited: list[dict[str, Any]], errors_dominate: str = "") -> None:
        """One interval ``at_s`` seconds into the run: the health samples that were limited in it
        (each counted in one interval only), or why errors dominated it (then none is blamed)."""
        self.intervals += 1
        if errors_dominate:
            self.errors.append(errors_dominate)
            return
        if not limited:
            return
        self.limited.append(f"at {clock(at_s)}: " + ", ".join(
            f"worker {h.get('worker', 0)}: {describe(h, action=False)}" for h in limited))
        for cause in sorted({h.get("cause") or "process" for h in limited}):
            self.causes[cause] = self.causes.get(cause, 0) + 1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def verdict_head(run: ClientRun, errors_first: bool = False) -> str:
    """Whether the client limited the run, and what to do (each action once, with its intervals)."""
    if errors_first and not run.limited:
        return "client: not judged (errors dominated the run)"
    if not run.limited:
        return "client: not limited (CPU and event-loop lag stayed under the thresholds)"
    n = len(run.limited)
    actions: dict[str, int] = {}  # causes that call for the same action are one
    for cause, k in run.causes.items():
        action = ACTION.get(cause, cause)
        actions[action] = actions.get(action, 0) + k
    ranked = sorted(actions.items(), key=lambda kv: -kv[1])
    todo = ranked[0][0] if len(ranked) == 1 else "; ".join(f"{a} ({_plural(k, 'interval')})" for a, k in ranked)
    who = "the machine the load generator runs on" if set(run.causes) == {"machine"} else "the load generator"
    return (f"CLIENT-LIMITED: {who}, not the server, limited the run in {_plural(n, 'interval')} of "
            f"{run.interval_s:g} s (last {run.limited[-1]}): {todo}")


def stall_phrase(stalls: StallStats) -> str:
    if not stalls.count:
        return f"no event-loop stall over {STALL_MS:g} ms"
    return (f"{_plural(stalls.count, 'event-loop stall')} over {STALL_MS:g} ms (longest {stalls.max_ms:.1f} ms, "
            f"mostly {stalls.top_culprit()})")


def timing_phrase(timing: dict[str, int], stalls: StallStats) -> str:
    """Whether any request's timing was touched (see :func:`new_timing`)."""
    n, late, coalesced = timing.get("requests", 0), timing.get("clock_in_stall", 0), timing.get("coalesced", 0)
    if not n:
        return ""
    if not late and not coalesced:
        return "no request's timing was affected" + (
            " (every read carries the kernel's receive time)" if stalls.count else "")
    parts = []
    if late:
        parts.append(f"{late} of {n} requests timed on arrival (TLS or --transport openai: no kernel stamps) were "
                     f"in flight during a stall: late by up to {stalls.max_ms:.0f} ms")
    if coalesced:
        parts.append(f"{coalesced} of {n} requests read several events at once (gaps left out of ITL)")
    return "; ".join(parts)


def client_line(run: ClientRun, stalls: StallStats | None = None, timing: dict[str, int] | None = None,
                errors_first: bool = False) -> str:
    """The one line: the verdict, the stalls, and whether any request's timing was affected."""
    head = verdict_head(run, errors_first)
    if stalls is None:
        return head
    parts = [stall_phrase(stalls)]
    if timing is not None and (text := timing_phrase(timing, stalls)):
        parts.append(text)
    rest = "; ".join(parts)
    return f"{head}. {rest[0].upper()}{rest[1:]}"


def client_details(run: ClientRun, stalls: StallStats, timing: dict[str, int], errors_first: bool = False) -> dict:
    """Everything behind the line, for ``PREFIX_run.json``'s ``client`` and ``--verbose``."""
    return {
        "verdict": client_line(run, stalls, timing, errors_first),
        "interval_s": run.interval_s,
        "intervals": run.intervals,
        "limited_intervals": list(run.limited),
        "limited_causes": dict(run.causes),
        "error_intervals": len(run.errors),
        "stalls": {**stalls.to_wire(), "text": describe_stalls(stalls)},
        "timing": dict(timing),
    }


def verbose_lines(details: dict[str, Any]) -> list[str]:
    """``--verbose``: the details as indented lines (the stalls' text one clause a line)."""
    lines = ["client details:"]
    lines += [f"  limited {text}" for text in details["limited_intervals"]]
    lines += [f"  {part}" for part in details["stalls"]["text"].split("; ")]
    t = details["timing"]
    lines.append(f"  timing: {t['requests']} requests, {t['coalesced']} with reads of several events, "
                 f"{t['clock_in_stall']} timed on arrival during a stall")
    return lines
