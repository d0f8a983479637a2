"""What part of a parsed trace to replay, and which requests each worker process sends. Pure.

:func:`select` cuts and stretches a parsed (time-ordered) trace: a window of trace seconds, the
first N requests of it, times scaled, the whole repeated end to end. :func:`split_for_worker`
deals the result out to worker processes so that together they send every request once.

Usage::

    reqs = select(trace.requests, start=10, duration=30, time_scale=0.5, loop=3)
    mine = split_for_worker(reqs, worker_index=0, workers=4)   # every 4th request, times kept
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from llmload.workload.trace.formats import TraceError, TraceRequest


def select(requests: Sequence[TraceRequest], *, time_scale: float = 1.0, start: float = 0.0,
           duration: float | None = None, limit: int | None = None, loop: int = 1) -> list[TraceRequest]:
    """The part of a parsed (time-ordered) trace to replay, with times from the replay's start.

    Keeps requests with ``start <= t < start + duration`` (trace seconds), then the first
    ``limit`` of them; times become ``(t - start) * time_scale`` (0.5 replays twice as fast);
    ``loop`` N plays the result N times end to end, each copy shifted by :func:`loop_period`.
    """
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise TraceError(f"time_scale: expected a number > 0, got {time_scale}")
    if not (start >= 0 and math.isfinite(start)):
        raise TraceError(f"start: expected seconds >= 0, got {start}")
    if duration is not None and not (duration > 0):
        raise TraceError(f"duration: expected seconds > 0, got {duration}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise TraceError(f"limit: expected a whole number >= 1, got {limit}")
    if isinstance(loop, bool) or not isinstance(loop, int) or loop < 1:
        raise TraceError(f"loop: expected a whole number >= 1, got {loop}")
    end = math.inf if duration is None else start + duration
    picked = [r for r in requests if start <= r.t < end]
    if limit is not None:
        picked = picked[:limit]
    if not picked:
        span = f"{requests[0].t:g}-{requests[-1].t:g} s" if requests else "no requests"
        raise TraceError(f"no request in the window start={start:g} s, duration={duration} (the trace spans {span})")
    base = [replace(r, t=(r.t - start) * time_scale) for r in picked]
    if loop == 1:
        return base
    period = loop_period(base)
    out = list(base)
    for k in range(1, loop):
        shift = k * period
        out.extend(replace(r, t=r.t + shift) for r in base)
    return out


def loop_period(requests: Sequence[TraceRequest]) -> float:
    """How far each repeat of a trace is shifted: its span plus its mean gap, so the seam between
    two copies looks like any other gap and the rate stays the trace's own."""
    if len(requests) < 2:
        raise TraceError("loop: a trace of one request has no period; give it at least two")
    span = requests[-1].t - requests[0].t
    if span <= 0:
        raise TraceError("loop: every request has the same time, so the trace has no period")
    return span + span / (len(requests) - 1)


def split_for_worker(requests: Sequence[TraceRequest], worker_index: int, workers: int,
                     keep_sessions: bool = False) -> list[TraceRequest]:
    """This worker's share of a trace: every ``workers``-th request from ``worker_index``, times
    unchanged (every worker replays from the same start), so the shares tile the trace exactly
    and each carries an even slice of its load at every moment.

    With ``keep_sessions`` the unit dealt round-robin is a session (requests with the same
    non-empty ``session_id``, in order of first appearance) so one worker plays a conversation
    in order; requests without a session are dealt one by one as before.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TraceError(f"workers: expected a whole number >= 1, got {workers}")
    if isinstance(worker_index, bool) or not isinstance(worker_index, int) or not 0 <= worker_index < workers:
        raise TraceError(f"worker_index: expected 0..{workers - 1}, got {worker_index}")
    if not keep_sessions:
        return list(requests[worker_index::workers])
    owner: dict[str, int] = {}
    unit = 0
    out = []
    for r in requests:
        if r.session_id:
            w = owner.get(r.session_id)
            if w is None:
                w = owner[r.session_id] = unit % workers
                unit += 1
        else:
            w = unit % workers
            unit += 1
        if w == worker_index:
            out.append(r)
    return out
