"""The report's and compare's charts, as inline SVG (:mod:`llmload.report.chart_parts`): full width,
latency axes from zero, a hollow point for a step without a verdict, labels that never overlap.

Each function takes the report's step dicts and returns the chart's ``<svg>``, or None when it has
nothing to draw. What one point (or bar) is, is said by the chart's caption (``CAPTIONS``).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd

from llmload.metrics import catalog
from llmload.report.chart_parts import (
    WIDE,
    bar_handle,
    figure_legend,
    figure_lib,
    hollow_handle,
    laid_out,
    name_axes,
    place_labels,
    step_marks,
    svg_of,
    thin_categories,
)

SLO_COLOR, CAPACITY_COLOR = "#d62728", "#2ca02c"

CAPTIONS = {
    "throughput_latency": "One point is one measured step, labelled with its {label}: across, its ok requests per "
                          "second; up, the p95 over the ok requests that started in its measured window. The star "
                          "is the capacity step, a dashed line an SLO limit. Axes start at zero.",
    "percentiles": "One point is one measured step: across, its {label}; up, the p50, p95 and p99 over the ok "
                   "requests that started in its measured window. Axes start at zero.",
    "tokens": "One pair of bars is one measured step ({label}): output tokens, and prompt + output tokens, per "
              "second, each ok request spread over its lifetime. A hollow bar: too few ok requests for a verdict.",
    "errors": "One bar is one measured step ({label}): its failed requests, split by status.",
    "ttft_time": "One point is one second of the run, by request start time: the TTFT p50 and p95 of the ok "
                 "requests that started in it (left axis, ms); the grey steps are the user count (right axis). "
                 "Axes start at zero.",
    "gpu": "One group of bars is one measured step ({label}) with GPU metrics: left, the mean SM, DRAM and tensor "
           "activity of its GPUs; right, their power summed (a hatched bar: throttled or an XID error, never "
           "capacity) and the J per output token (the energy counters' difference over the output tokens between "
           "the same scrapes).",
    "curves": "One point is one measured step of a run, labelled with its {label}: across, its ok requests per "
              "second; up, the p95 over the ok requests that started in its measured window. A star is a run's "
              "capacity step, a dashed line an SLO limit. Axes start at zero.",
}
"""What one point of each chart is, by chart key (``{label}``: the report's level label, users or req/s)."""


def _headline(axes: Any, stat: str = "") -> list[tuple[Any, str, str]]:
    """(axis, report.json field, title) for each headline metric of the catalog (TTFT, TPOT): a panel each."""
    return [(ax, m.row_column or "", f"{m.title(stat) if stat else m.label} ({m.unit})")
            for ax, m in zip(np.atleast_1d(axes), catalog.HEADLINE, strict=True)]


def _fig():
    """pyplot on Agg (the sweep's PNG charts use it too)."""
    return figure_lib()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _fig().close(fig)
    return buf.getvalue()


def _from_zero(ax: Any, x: bool = False) -> None:
    """The value axis (and with ``x`` the load axis) from 0: 0 joins the data limits before autoscaling, so
    the margin above the data stays (a flat 20-ms line sits under the top, not on it)."""
    lim = ax.dataLim
    if np.isfinite([lim.x0, lim.y0]).all():
        ax.update_datalim([(0 if x else lim.x0, 0)])
        ax.autoscale_view()
    ax.set_ylim(bottom=0)
    if x:
        ax.set_xlim(left=0)
    ax.grid(alpha=0.3)


def _slo_lines(ax: Any, slos: list[Any], field: str) -> None:
    for slo in slos:
        if slo.column == field and slo.stat == "p95":
            ax.axhline(slo.limit, color=SLO_COLOR, ls="--", lw=1, label=f"SLO {slo.metric} ≤ {slo.limit:g}")


def _extras(plt: Any, steps: list[dict[str, Any]], bar: bool = False) -> list[Any]:
    """The legend's "hollow" entry, when a step without a verdict is drawn."""
    return [hollow_handle(plt, bar)] if any(s["thin"] for s in steps) else []


def _label_items(steps: list[dict[str, Any]], field: str, cap: dict[str, Any], color: str) -> list[tuple]:
    """(req/s, p95, level, important, color) per step: the capacity step and the two ends are labelled first."""
    last = len(steps) - 1
    return [(s["rps"], s[field]["p95"], f'{s["level"]:g}',
             s["start_time"] == cap.get("start_time") or i in (0, last), color) for i, s in enumerate(steps)]


def _rps_panels(series: list[tuple[str, list[dict[str, Any]], dict[str, Any]]], slos: list[Any], key: str,
                name_runs: bool) -> str:
    """Each headline metric's p95 against req/s: a line per run, its capacity starred (report and compare)."""
    plt = _fig()
    fig, axes = plt.subplots(1, len(catalog.HEADLINE), figsize=WIDE, layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, field, title in _headline(axes, "p95"):
        for i, (name, steps, cap) in enumerate(series):
            pts = sorted(steps, key=lambda s: s["rps"])
            color = colors[i % len(colors)]
            step_marks(ax, [s["rps"] for s in pts], [s[field]["p95"] for s in pts], [s["thin"] for s in pts],
                       color, label=name if name_runs else "p95 of a step")
            for s in pts:
                if s["start_time"] == cap.get("start_time") and s[field]["p95"] is not None:
                    ax.plot([s["rps"]], [s[field]["p95"]], "*", ms=16, color=CAPACITY_COLOR if not name_runs
                            else color, mec="black", mew=0.6, zorder=4,
                            label="capacity step" if not name_runs else f"capacity of {name}")
        _slo_lines(ax, slos, field)
        ax.set_xlabel("requests/s (ok, edge-corrected)")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.margins(x=0.06, y=0.1)
        _from_zero(ax, x=True)
    figure_legend(fig, axes, _extras(plt, [s for _, steps, _ in series for s in steps]))
    name_axes(key, axes)
    renderer = laid_out(fig)
    for ax, field, _ in _headline(axes, "p95"):
        place_labels(renderer, ax, [it for i, (_, steps, cap) in enumerate(series) for it in _label_items(
            sorted(steps, key=lambda s: s["rps"]), field, cap, colors[i % len(colors)] if name_runs else "#333333")])
    return svg_of(fig, key)


def throughput_latency(steps: list[dict[str, Any]], slos: list[Any], capacity: dict[str, Any],
                       label: str = "users") -> str | None:
    """Each headline metric's p95 (TTFT, TPOT) against req/s, SLO limits as lines, the capacity step starred."""
    if not steps:
        return None
    return _rps_panels([("", steps, capacity)], slos, "throughput_latency", name_runs=False)


def percentiles_per_step(steps: list[dict[str, Any]], label: str = "users") -> str | None:
    if not steps:
        return None
    plt = _fig()
    fig, axes = plt.subplots(1, len(catalog.HEADLINE), figsize=WIDE, layout="constrained")
    levels = [s["level"] for s in steps]
    thin = [s["thin"] for s in steps]
    for ax, field, title in _headline(axes):
        # smaller marks drawn later: where p95 and p99 coincide, both stay visible
        for q, marker, line, color, size in (("p50", "o", "-", "C0", 8), ("p95", "s", "--", "C1", 6),
                                             ("p99", "^", ":", "C2", 4.5)):
            step_marks(ax, levels, [s[field][q] for s in steps], thin, color, marker=marker, line=line, label=q,
                       size=size)
        ax.set_xlabel(label)
        ax.set_ylabel("ms")
        ax.set_title(title)
        _from_zero(ax, x=True)
    figure_legend(fig, axes, _extras(plt, steps))
    name_axes("percentiles", axes)
    return svg_of(fig, "percentiles")


def _bars(ax: Any, x: np.ndarray, heights: list[float], width: float, color: str, thin: list[bool]) -> None:
    """Bars, hollow (outlined) for a step without a verdict (the legend has proxies: :func:`bar_handle`)."""
    ax.bar(x, heights, width, color=[("white" if t else color) for t in thin],
           edgecolor=color, linewidth=1.2)


def tokens_per_step(steps: list[dict[str, Any]], label: str = "users") -> str | None:
    if not steps:
        return None
    plt = _fig()
    fig, ax = plt.subplots(figsize=(WIDE[0], 3.4), layout="constrained")
    x = np.arange(len(steps))
    thin = [s["thin"] for s in steps]
    _bars(ax, x - 0.2, [s["output_tps"] for s in steps], 0.4, "C0", thin)
    _bars(ax, x + 0.2, [s["total_tps"] for s in steps], 0.4, "C1", thin)
    thin_categories(ax, list(x), [f'{s["level"]:g}' for s in steps])
    ax.set_xlabel(label)
    ax.set_ylabel("tok/s")
    ax.set_title("Tokens per second per step")
    ax.grid(alpha=0.3, axis="y")
    figure_legend(fig, [ax], [bar_handle("C0", "output tok/s"), bar_handle("C1", "total tok/s (prompt + output)"),
                              *_extras(plt, steps, bar=True)])
    name_axes("tokens", [ax])
    return svg_of(fig, "tokens")


def gpu_per_step(steps: list[dict[str, Any]], label: str = "users") -> str | None:
    """The GPUs per step (runs with GPU metrics): activity, and power with J per output token."""
    steps = [s for s in steps if s.get("gpu")]
    if not steps:
        return None
    plt = _fig()
    fig, (act, energy) = plt.subplots(1, 2, figsize=(WIDE[0], 3.4), layout="constrained")
    x = np.arange(len(steps))
    names = [f'{s["level"]:g}' for s in steps]
    parts = (("sm_active", "SM active", "C0"), ("dram_active", "DRAM active", "C1"),
             ("tensor_active", "tensor active", "C2"))
    for i, (key, _, color) in enumerate(parts):
        act.bar(x + (i - 1) * 0.27, [(s["gpu"].get(key) or 0) * 100 for s in steps], 0.27, color=color)
    act.set_ylim(0, 100)
    act.set_ylabel("% (mean of the GPUs)")
    act.set_title("GPU activity per step")
    flagged = [bool(s.get("gpu_flag")) for s in steps]
    bars = energy.bar(x, [s["gpu"].get("power_w") or 0 for s in steps], 0.5, color="C7")
    for bar, hatched in zip(bars, flagged, strict=True):
        if hatched:
            bar.set_hatch("//")
    energy.set_ylabel("power W (all GPUs)")
    per_token = energy.twinx()
    per_token.plot(x, [s["gpu"].get("j_per_output_token") for s in steps], "o-", color="C3")
    per_token.set_ylabel("J per output token")
    per_token.set_ylim(bottom=0)
    energy.set_title("Power and J per output token per step")
    for ax in (act, energy):
        thin_categories(ax, list(x), names)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3, axis="y")
    handles = [bar_handle(c, n) for _, n, c in parts] + [bar_handle("C7", "power W")]
    handles.append(plt.Line2D([], [], color="C3", marker="o", label="J per output token"))
    figure_legend(fig, [act], handles)
    name_axes("gpu", [act, energy])
    return svg_of(fig, "gpu")


def errors_per_step(steps: list[dict[str, Any]], label: str = "users") -> str | None:
    kinds = sorted({k for s in steps for k in s["errors_by_status"]})
    if not steps or not kinds:
        return None  # nothing failed: no chart
    plt = _fig()
    fig, ax = plt.subplots(figsize=(WIDE[0], 3.2), layout="constrained")
    x = np.arange(len(steps))
    bottom = np.zeros(len(steps))
    for i, k in enumerate(kinds):
        vals = np.array([s["errors_by_status"].get(k, 0) for s in steps], dtype=float)
        ax.bar(x, vals, bottom=bottom, label=k, color=f"C{i % 10}")
        bottom += vals
    thin_categories(ax, list(x), [f'{s["level"]:g}' for s in steps])
    ax.set_xlabel(label)
    ax.set_ylabel("failed requests")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: 0, 1, 2, never 0.5
    ax.set_title("Failed requests per step")
    ax.grid(alpha=0.3, axis="y")
    figure_legend(fig, [ax])
    name_axes("errors", [ax])
    return svg_of(fig, "errors")


def ttft_over_time(df: pd.DataFrame) -> str | None:
    ok = df["ok"].to_numpy(dtype=bool)
    if not ok.any() or "ttft_ms" not in df:
        return None
    plt = _fig()
    t0 = float(df["start_time"].iloc[0])
    sec = np.floor(df["start_time"].to_numpy()[ok] - t0)  # arrays, not a copy of every column of the ok rows
    g = pd.DataFrame({"sec": sec, "ttft": df["ttft_ms"].to_numpy(dtype=float)[ok]}).groupby("sec")["ttft"]
    q = g.quantile([0.5, 0.95]).unstack()
    users = pd.DataFrame({"sec": np.floor(df["start_time"].to_numpy() - t0),
                          "users": df["users"].to_numpy()}).groupby("sec")["users"].max()
    fig, ax = plt.subplots(figsize=(WIDE[0], 3.4), layout="constrained")
    ax.plot(q.index, q[0.5], label="TTFT p50", color="C0", gid="ttft_time-p50")
    ax.plot(q.index, q[0.95], label="TTFT p95", color="C1", gid="ttft_time-p95")
    ax.set_xlabel("seconds since the first request (by start time)")
    ax.set_ylabel("TTFT (ms)")
    ax2 = ax.twinx()
    ax2.step(users.index, users.values, where="post", color="#7f7f7f", alpha=0.6, label="users", gid="ttft_time-users")
    ax2.set_ylabel("users")
    ax2.set_ylim(bottom=0)
    # A twin axis is drawn after its host, so the users' steps covered the TTFT lines: the TTFT axis
    # goes on top, its background left out (it would hide the users' steps under it).
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.set_title("TTFT over time")
    _from_zero(ax, x=True)
    figure_legend(fig, [ax, ax2])
    name_axes("ttft_time", [ax])
    ax2.yaxis.set_gid("axis-y2-ttft_time-0")
    return svg_of(fig, "ttft_time")


def compare_curves(series: list[tuple[str, list[dict[str, Any]], dict[str, Any]]], slos: list[Any],
                   label: str = "users") -> str | None:
    """Every run's headline p95s (TTFT, TPOT) against req/s on one pair of axes, SLO limits as lines,
    each run's capacity step starred. ``series``: (run label, its steps, its capacity)."""
    if not any(steps for _, steps, _ in series):
        return None
    return _rps_panels(series, slos, "curves", name_runs=True)
