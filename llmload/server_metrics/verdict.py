"""Why a load step is as fast as it is, from the server's side: the "limited by" verdict. Pure.

:func:`server_verdict` reads one step's :class:`~llmload.server_metrics.step_stats.StepServerStats`
(and, when given, the client's step row and a lighter baseline step) and names one of:

* ``kv_cache``: requests were preempted, or the KV cache peaked at ``kv_full`` (95 %) or more
  while requests queued: new requests wait for memory.
* ``queueing``: requests queued (on average and in the median scrape at least ``waiting``
  requests and ``waiting_share`` of the running batch; or a queue that grew by ``waiting_growth``
  per second and, over the step, by at least one request and that share, with requests waiting
  in the median scrape) while the KV cache had
  room: the batch is capped by a request limit (vLLM ``--max-num-seqs``, SGLang
  ``--max-running-requests``, TGI ``--max-batch-size``, TensorRT-LLM ``max_batch_size``,
  llama.cpp ``--parallel`` slots), not by memory.
* ``compute``: neither, and each decode step takes longer as the batch grows: against a lighter
  baseline step, the running batch grew by ``batch_growth`` (and one request) and TPOT by
  ``tpot_growth`` (the client's TPOT p50, else the server's ITL p50; never one against the other).
* ``not_saturated``: neither, the batch grew as above, and TPOT did not: no resource is near its
  limit.
* ``not_enough_evidence``: neither, and the step cannot tell the causes apart: no lighter step to
  compare with (a single step, or the baseline step itself), a batch that did not grow, no TPOT,
  or a KV cache at ``kv_full`` that nothing waits for yet. The sentence names what would separate
  them (another step with more users).
* ``unknown``: no server metrics in the step, or none that tell queueing from memory.

Neighbouring steps get hysteresis: after a ``queueing`` or ``kv_cache`` step, the next one counts
as queued down to ``leave_share`` (70 %) of the queue floor, and after ``kv_cache`` a KV peak of
``kv_leave`` (90 %) still counts as full; so a run near an edge keeps one label rather than
flipping from step to step.

The verdict comes with a sentence carrying its evidence numbers and the numbers themselves.
:func:`token_rate_warning` checks that the server's token rate and the client's agree.

Usage::

    stats = aggregate_step(scrapes, step["start_time"], step["start_time"] + step["duration_s"])
    v = server_verdict(stats, client=step, baseline=first_stats, baseline_client=first_step)
    v.limited_by, v.reason        # "kv_cache", "KV cache: usage peaked at 98 % ..."
    token_rate_warning(stats.generation_tps, step["output_tps"])   # None when they agree
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llmload.server_metrics.step_stats import StepServerStats

KV_CACHE, QUEUEING, COMPUTE, UNKNOWN = "kv_cache", "queueing", "compute", "unknown"
NOT_SATURATED, NOT_ENOUGH = "not_saturated", "not_enough_evidence"


@dataclass(frozen=True, slots=True)
class Thresholds:
    kv_full: float = 0.95
    """Peak KV usage (0..1) that counts as full."""
    waiting: float = 0.5
    """Mean waiting requests that count as a queue."""
    waiting_share: float = 0.1
    """...and at least this share of the running batch: a new request always waits a moment for
    the next engine step, so a big batch shows a few waiting at any scrape without any queue."""
    waiting_growth: float = 0.05
    """Waiting requests added per second that count as a growing queue."""
    tpot_growth: float = 1.2
    """TPOT ratio to the baseline step that counts as "slower with a bigger batch"."""
    batch_growth: float = 1.25
    """Running-batch ratio to the baseline step (and at least one request more) that counts as a
    bigger batch: below it, TPOT against the baseline cannot tell compute from room to spare."""
    leave_share: float = 0.7
    """Hysteresis: after a step that queued, the next one counts as queueing down to this share of
    the queue floor, so steps near the edge do not flip compute/queueing/compute."""
    kv_leave: float = 0.9
    """Hysteresis for the KV cache: after a ``kv_cache`` step, a peak this full still counts as full."""


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class Verdict:
    limited_by: str
    """``kv_cache``, ``queueing``, ``compute`` or ``unknown``."""
    reason: str
    """One sentence with the evidence."""
    evidence: dict[str, float] = field(default_factory=dict)


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _num(x: float) -> str:
    return f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"


def _p(d: Mapping[str, Any] | None, key: str) -> float | None:
    if not d:
        return None
    v = d.get(key)
    return float(v) if isinstance(v, int | float) else None


def _tpot_pair(stats: StepServerStats, client: Mapping[str, Any] | None, baseline: StepServerStats | None,
               baseline_client: Mapping[str, Any] | None) -> tuple[float | None, float | None, str]:
    """Median time per output token of this step and of the baseline, from one source: the
    client's TPOT when this step has it, else the server's ITL."""
    tpot = _p(client.get("tpot_ms") if client else None, "p50")
    if tpot is not None:
        return tpot, _p(baseline_client.get("tpot_ms") if baseline_client else None, "p50"), "TPOT p50"
    return _p(stats.itl_ms, "p50"), _p(baseline.itl_ms if baseline else None, "p50"), "server ITL p50"


def _evidence(stats: StepServerStats) -> dict[str, float]:
    keys = ("kv_usage_mean", "kv_usage_max", "waiting_mean", "waiting_max", "waiting_trend_per_s",
            "running_mean", "running_max", "preemptions", "prompt_tps", "generation_tps")
    out = {k: getattr(stats, k) for k in keys if getattr(stats, k) is not None}
    queue_p95 = _p(stats.queue_time_ms, "p95")
    if queue_p95 is not None:
        out["server_queue_time_p95_ms"] = queue_p95
    ttft_p95 = _p(stats.ttft_ms, "p95")
    if ttft_p95 is not None:
        out["server_ttft_p95_ms"] = ttft_p95
    return out


def _queue_words(stats: StepServerStats) -> str:
    words = f"{_num(stats.waiting_mean or 0.0)} requests waited on average"
    if stats.waiting_trend_per_s is not None and abs(stats.waiting_trend_per_s) >= 0.01:
        words += f" ({stats.waiting_trend_per_s:+.2f}/s)"
    queue_p95 = _p(stats.queue_time_ms, "p95")
    if queue_p95 is not None:
        words += f", server queue time p95 {queue_p95:.0f} ms"
    return words


def server_verdict(stats: StepServerStats | None, client: Mapping[str, Any] | None = None,
                   baseline: StepServerStats | None = None, baseline_client: Mapping[str, Any] | None = None,
                   thresholds: Thresholds = DEFAULT_THRESHOLDS, previous: str | None = None) -> Verdict:
    """What limited this step, server-side. ``client`` is the report's step row (``tpot_ms`` ...);
    ``baseline``/``baseline_client`` a lighter step (usually the first) to compare TPOT with;
    ``previous`` the verdict of the step before it in time (the hysteresis of :class:`Thresholds`)."""
    th = thresholds
    if stats is None or not stats.has_metrics():
        return Verdict(UNKNOWN, "unknown: no server metrics were scraped during this step")
    evidence = _evidence(stats)
    kv_max, kv_mean = stats.kv_usage_max, stats.kv_usage_mean
    preempted = (stats.preemptions or 0.0) > 0
    floor = max(th.waiting, th.waiting_share * (stats.running_mean or 0.0))
    if previous in (QUEUEING, KV_CACHE):
        floor *= th.leave_share
    trend = stats.waiting_trend_per_s or 0.0
    # mean and median: a queue shows in most scrapes, not in one that caught a burst of arrivals
    mean = stats.waiting_mean or 0.0
    typical = mean if stats.waiting_median is None else min(mean, stats.waiting_median)
    grew = (trend >= th.waiting_growth and trend * (stats.end - stats.start) >= max(1.0, floor)
            and (stats.waiting_median is None or stats.waiting_median > 0))
    queued = typical >= floor or grew
    kv_full = kv_max is not None and kv_max >= (th.kv_leave if previous == KV_CACHE else th.kv_full)

    if preempted or (kv_full and queued):
        parts = []
        if kv_max is not None:
            mean = f" (mean {_pct(kv_mean)})" if kv_mean is not None else ""
            parts.append(f"usage peaked at {_pct(kv_max)}{mean}")
        if preempted:
            n = stats.preemptions or 0.0
            parts.append(f"{n:.0f} request{'s were' if round(n) != 1 else ' was'} preempted")
        if queued:
            parts.append(_queue_words(stats))
        return Verdict(KV_CACHE, "KV cache: " + ", ".join(parts)
                       + " — new requests wait for KV memory, not for compute", evidence)

    if queued:
        kv = (f"the KV cache peaked at only {_pct(kv_max)}" if kv_max is not None
              else "the server does not report KV usage")
        batch = ""
        if stats.running_max is not None:
            batch = (f"; the running batch stayed at {_num(stats.running_mean or 0.0)} on average"
                     f" (max {stats.running_max:.0f})")
        return Verdict(QUEUEING, f"queueing: {_queue_words(stats)} while {kv}{batch}"
                       " — a request limit (max running requests / slots), not memory, holds them back", evidence)

    if stats.waiting_mean is None and kv_max is None:
        return Verdict(UNKNOWN, "unknown: the server reports neither its queue nor its KV cache", evidence)
    return _unqueued(stats, client, baseline, baseline_client, th, floor, kv_full, evidence)


def _unqueued(stats: StepServerStats, client: Mapping[str, Any] | None, baseline: StepServerStats | None,
              baseline_client: Mapping[str, Any] | None, th: Thresholds, floor: float, kv_full: bool,
              evidence: dict[str, float]) -> Verdict:
    """No queue and no preemption: compute-bound, not saturated, or no way to tell from this step.

    A busy GPU shows only as decode steps that slow down as the batch grows, so "compute" needs
    a lighter step to compare with, a batch that grew since, and a TPOT that grew with it. A
    batch that grew while TPOT stayed flat, with the KV cache short of full, is a server with room
    ("not saturated"). Anything less (one step, the same batch as the lighter step, no TPOT, a
    full cache that nobody waits for yet) cannot separate the causes, and the verdict says what
    would."""
    kv_max = stats.kv_usage_max
    kv = f"KV cache at most {_pct(kv_max)}" if kv_max is not None else "KV usage not reported"
    waiting = stats.waiting_mean or 0.0
    queue = ("no request waited" if waiting == 0 else
             f"the queue stayed short ({_num(waiting)} waiting on average, under the {_num(floor)} that counts "
             "as a queue)")
    head = f"{queue} and {kv}"
    more = "another step with more users would separate them"
    if kv_full:
        return Verdict(NOT_ENOUGH, f"not enough evidence: {queue} while the KV cache peaked at {_pct(kv_max or 0.0)}: "
                       "memory is at its edge but nothing waits for it yet; a step with more users would show "
                       "whether new requests then wait for KV memory", evidence)
    tpot, base_tpot, tpot_name = _tpot_pair(stats, client, baseline, baseline_client)
    if tpot is not None:
        evidence["tpot_p50_ms"] = tpot
    running, base_running = stats.running_mean, baseline.running_mean if baseline is not None else None
    lighter = baseline is not None and baseline is not stats and baseline.start != stats.start
    if not lighter or running is None or base_running is None:
        batch = f" with {_num(running)} requests running" if running is not None else ""
        measured = f"; {tpot_name} {tpot:.0f} ms{batch}" if tpot is not None else batch
        return Verdict(NOT_ENOUGH, f"not enough evidence: {head}{measured}; with no lighter step to compare with, "
                       f"a busy GPU and a server with room look the same: {more} (its TPOT against this one's)",
                       evidence)
    if running < base_running * th.batch_growth or running - base_running < 1.0:
        return Verdict(NOT_ENOUGH, f"not enough evidence: {head}; the running batch stayed at "
                       f"{_num(base_running)} → {_num(running)}, so this step's TPOT says nothing about how the GPU "
                       f"copes with a bigger batch: {more}", evidence)
    if tpot is None or not base_tpot:
        return Verdict(NOT_ENOUGH, f"not enough evidence: {head}; the batch grew from {_num(base_running)} to "
                       f"{_num(running)} but neither the client's TPOT nor the server's ITL was measured at both "
                       "steps, and only they show a GPU slowing with the batch", evidence)
    ratio = tpot / base_tpot
    evidence["tpot_growth"] = ratio
    moved = f"{tpot_name} {'rose' if ratio >= th.tpot_growth else 'moved only'} {ratio:.1f}× ({base_tpot:.0f} → " \
            f"{tpot:.0f} ms) while the running batch went from {_num(base_running)} to {_num(running)}"
    if ratio >= th.tpot_growth:
        return Verdict(COMPUTE, f"compute: {head}; {moved} — each decode step slows as the batch grows", evidence)
    return Verdict(NOT_SATURATED, f"not saturated: {head}; {moved} — no resource is near its limit: the server "
                   "has room for more load", evidence)


def token_rate_warning(server_tps: float | None, client_tps: float | None, *, what: str = "output",
                       tolerance: float = 0.15) -> str | None:
    """A warning sentence when the server's and the client's token rates differ by more than
    ``tolerance`` (relative to the client's), else None (also when either is unknown).

    Over a whole step they should agree; they differ when other traffic shares the server, when
    requests end outside the window (SGLang, TGI, TensorRT-LLM and llama.cpp count a request's
    tokens when it finishes, vLLM every step), or when usage counts differ from the engine's.
    """
    if server_tps is None or client_tps is None or (server_tps <= 0 and client_tps <= 0):
        return None
    if client_tps <= 0:
        return (f"the server counted {server_tps:.1f} {what} tok/s but the client measured none: "
                "is other traffic hitting this server, or did no request finish in the window?")
    diff = (server_tps - client_tps) / client_tps
    if abs(diff) <= tolerance:
        return None
    if diff > 0:
        cause = ("other traffic on the server, or tokens of requests the client cut off or that finished "
                 "outside this window")
    else:
        cause = ("the server counts a request's tokens when it finishes (all but vLLM), so requests still "
                 "running at the window's end are missing; or the client's usage counts differ from the engine's")
    return (f"server {what} tokens {server_tps:.1f} tok/s vs client {client_tps:.1f} tok/s "
            f"({diff:+.0%}, beyond ±{tolerance:.0%}): {cause}")
