"""What the GPUs did over one load step: means, energy, throttling and the bound-by verdict. Pure.

Input: the run's scrapes, each ``(time, {gpu key: reading})`` as :func:`~llmload.server_metrics.gpu.gpu_readings`
gives them, in time order. Over a window ``[start, end]``, from the scrapes inside it:

* per GPU: the mean (over the window's scrapes but its first, which speaks of the time before it) of
  utilisation, SM active (``DCGM_FI_PROF_SM_ACTIVE``, else
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, the default counters' stand-in), DRAM active, tensor active
  and power; memory used (mean and max, MiB), the lowest SM clock, the highest temperature;
* **energy** from the energy counter's difference between the window's first and last scrape
  (mJ → J). Without the counter, or when it went backwards (a reset), the power readings are
  integrated instead (trapezoids), and ``energy_source`` says ``power``;
* **throttled**: a throttling bit (power cap, HW slowdown, SW/HW thermal, power brake) in any
  scrape's clock-event bitmask, a power or thermal violation counter that grew, or
  dcgm-exporter's own clock-event count of those reasons above 0;
* **xid**: an XID error code in a scrape that differs from the GPU's code at the run's first
  scrape (the field holds the *last* XID, so an error from before the run is not this step's), or
  dcgm-exporter's XID count above 0;
* the GPUs together: energy, power and memory summed; activity and utilisation averaged;
  throttled and xid if any GPU was.

**Bound by** (:func:`bound_by`), from the mean activity ratios of the GPUs together:

* ``underused``: DRAM active and tensor active both below ``UNDERUSED_BELOW`` (0.30) and SM
  active (when known) below ``SM_BUSY`` (0.50): the GPU mostly waits (on the scheduler, the
  network, or too little load);
* ``memory-bandwidth-bound``: else, DRAM active ≥ tensor active: the step streams weights and
  KV cache more than it multiplies (decode at small batches);
* ``compute-bound``: else: the tensor pipes are the busier (prefill, large batches);
* without the profiling (DCP) fields, ``underused`` when utilisation < 0.50, else ``unknown``.

Usage::

    stats = gpu_step(points, start, end, first_xid)          # GpuStep: per_gpu, total
    verdict, reason = bound_by(stats.total)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmload.server_metrics.gpu import throttle_reasons

UNDERUSED_BELOW = 0.30
SM_BUSY = 0.50
UTIL_BUSY = 0.50
MEAN_KEYS = ("util", "sm_active", "dram_active", "tensor_active", "power_w", "fb_used_mib")
BOUND_BY = ("memory-bandwidth-bound", "compute-bound", "underused", "unknown")

Points = list[tuple[float, dict[str, dict[str, float]]]]


@dataclass
class GpuStep:
    """One window's GPU numbers: ``per_gpu`` (key → entry) and ``total`` (the GPUs together)."""

    per_gpu: dict[str, dict[str, Any]] = field(default_factory=dict)
    total: dict[str, Any] = field(default_factory=dict)
    first_t: float | None = None
    last_t: float | None = None

    @property
    def span_s(self) -> float:
        return 0.0 if self.first_t is None or self.last_t is None else self.last_t - self.first_t


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _series(inside: Points, gpu: str, key: str) -> list[tuple[float, float]]:
    return [(t, r[gpu][key]) for t, r in inside if gpu in r and key in r[gpu]]


def _energy(inside: Points, gpu: str) -> tuple[float | None, str | None]:
    counter = _series(inside, gpu, "energy_mj")
    if len(counter) >= 2 and counter[-1][1] >= counter[0][1]:
        return (counter[-1][1] - counter[0][1]) / 1000.0, "counter"
    power = _series(inside, gpu, "power_w")
    if len(power) >= 2:
        return sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in zip(power, power[1:], strict=False)), "power"
    return None, None


def _grew(series: list[tuple[float, float]]) -> bool:
    return len(series) >= 2 and series[-1][1] > series[0][1]


def _one_gpu(inside: Points, gpu: str, first_xid: float | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"scrapes": sum(1 for _, r in inside if gpu in r)}
    # A gauge read at a scrape describes the time up to it (DCGM samples over its update period; the
    # mock averages since its previous scrape): the window's first scrape speaks of time before
    # the window, so the means leave it out when there are later ones.
    later = inside[1:] if len(inside) > 1 else inside
    for key in MEAN_KEYS:
        entry[key] = _mean([v for _, v in _series(later, gpu, key)])
    if entry["sm_active"] is None:
        entry["sm_active"] = _mean([v for _, v in _series(later, gpu, "gr_engine_active")])
        entry["sm_active_field"] = "gr_engine_active" if entry["sm_active"] is not None else None
    else:
        entry["sm_active_field"] = "sm_active"
    used = [v for _, v in _series(inside, gpu, "fb_used_mib")]
    entry["fb_used_mib_max"] = max(used) if used else None
    clocks = [v for _, v in _series(inside, gpu, "sm_clock_mhz")]
    entry["sm_clock_mhz_min"] = min(clocks) if clocks else None
    temps = [v for _, v in _series(inside, gpu, "temp_c")]
    entry["temp_c_max"] = max(temps) if temps else None
    entry["energy_j"], entry["energy_source"] = _energy(inside, gpu)
    reasons: set[str] = set()
    for _, bits in _series(inside, gpu, "clock_event_reasons"):
        reasons.update(throttle_reasons(bits))
    if _grew(_series(inside, gpu, "power_violation_ns")):
        reasons.add("power_violation")
    if _grew(_series(inside, gpu, "thermal_violation_ns")):
        reasons.add("thermal_violation")
    if any(v > 0 for _, v in _series(inside, gpu, "clock_events")):
        reasons.add("clock_events")
    entry["throttle_reasons"] = sorted(reasons)
    entry["throttled"] = bool(reasons)
    xids = sorted({int(v) for _, v in _series(inside, gpu, "xid") if v and v != first_xid})
    if any(v > 0 for _, v in _series(inside, gpu, "xid_count")) and not xids:
        xids = [-1]  # the exporter counted one; its code is in its own label, not kept here
    entry["xid_errors"] = xids
    return entry


def gpu_step(points: Points, start: float, end: float, first_xid: dict[str, float] | None = None) -> GpuStep:
    """The GPUs over ``[start, end]`` (see the module docstring); empty without a scrape inside."""
    inside = [(t, r) for t, r in points if start <= t <= end]
    out = GpuStep()
    if not inside:
        return out
    out.first_t, out.last_t = inside[0][0], inside[-1][0]
    gpus = sorted({g for _, r in inside for g in r})
    first_xid = first_xid or {}
    out.per_gpu = {g: _one_gpu(inside, g, first_xid.get(g)) for g in gpus}
    entries = list(out.per_gpu.values())
    total: dict[str, Any] = {"gpus": len(entries), "scrapes": len(inside)}
    for key in ("util", "sm_active", "dram_active", "tensor_active"):
        total[key] = _mean([e[key] for e in entries if e[key] is not None])
    for key in ("power_w", "fb_used_mib", "fb_used_mib_max", "energy_j"):
        known = [e[key] for e in entries if e[key] is not None]
        total[key] = sum(known) if known else None
    sources = {e["energy_source"] for e in entries if e["energy_source"]}
    total["energy_source"] = "counter" if sources == {"counter"} else ("power" if sources else None)
    total["throttled"] = any(e["throttled"] for e in entries)
    total["xid_errors"] = sorted({x for e in entries for x in e["xid_errors"]})
    total["bound_by"], total["bound_by_reason"] = bound_by(total)
    for e in entries:
        e["bound_by"], _ = bound_by(e)
    out.total = total
    return out


def bound_by(stats: dict[str, Any]) -> tuple[str, str]:
    """``memory-bandwidth-bound``, ``compute-bound``, ``underused`` or ``unknown``, and why (the
    thresholds are in the module docstring)."""
    dram, tensor, sm, util = (stats.get(k) for k in ("dram_active", "tensor_active", "sm_active", "util"))
    if dram is None or tensor is None:
        if util is not None and util < UTIL_BUSY:
            return "underused", f"utilisation {util:.0%} < {UTIL_BUSY:.0%} (no DRAM/tensor activity fields)"
        return "unknown", "no DRAM and tensor activity (DCGM's profiling fields are not exported)"
    said = f"DRAM active {dram:.2f}, tensor active {tensor:.2f}" + (f", SM active {sm:.2f}" if sm is not None else "")
    if dram < UNDERUSED_BELOW and tensor < UNDERUSED_BELOW and (sm is None or sm < SM_BUSY):
        return "underused", f"{said}: all below {UNDERUSED_BELOW:.2f}" + (f" (SM below {SM_BUSY:.2f})"
                                                                          if sm is not None else "")
    if dram >= tensor:
        return "memory-bandwidth-bound", f"{said}: DRAM at least as busy as the tensor pipes"
    return "compute-bound", f"{said}: the tensor pipes busier than DRAM"
