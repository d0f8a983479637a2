"""The report's charts as PNG bytes (matplotlib, Agg): embedded in the HTML so it opens offline."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd

from llmload.metrics import catalog


def _headline(axes: Any, stat: str = "") -> list[tuple[Any, str, str]]:
    """(axis, report.json field, title) for each headline metric of the catalog (TTFT, TPOT): a panel each."""
    return [(ax, m.row_column or "", f"{m.title(stat) if stat else m.label} ({m.unit})")
            for ax, m in zip(np.atleast_1d(axes), catalog.HEADLINE, strict=True)]


def _fig():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _fig().close(fig)
    return buf.getvalue()


def throughput_latency(steps: list[dict[str, Any]], slos: list[Any], capacity: dict[str, Any],
                       label: str = "users") -> bytes | None:
    """Each headline metric's p95 (TTFT, TPOT) against req/s, SLO limits as lines, the capacity step marked."""
    if not steps:
        return None
    plt = _fig()
    fig, axes = plt.subplots(1, len(catalog.HEADLINE), figsize=(10, 3.6))
    rps = [s["rps"] for s in steps]
    for ax, field, title in _headline(axes, "p95"):
        ys = [s[field]["p95"] for s in steps]
        ax.plot(rps, ys, "o-", color="#1f77b4")
        for s, x, y in zip(steps, rps, ys, strict=True):
            if y is not None:
                ax.annotate(f'{s["level"]:g}', (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        for slo in slos:
            if slo.column == field and slo.stat == "p95":
                ax.axhline(slo.limit, color="#d62728", ls="--", lw=1, label=f"SLO {slo.metric}")
        for s, x, y in zip(steps, rps, ys, strict=True):
            if s["start_time"] == capacity.get("start_time") and y is not None:  # the one capacity step
                ax.plot([x], [y], "*", ms=14, color="#2ca02c", label="capacity")
        ax.set_xlabel("requests/s (ok, edge-corrected)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(f"Throughput vs latency per step (labels: {label})", fontsize=10)
    return _png(fig)


def percentiles_per_step(steps: list[dict[str, Any]], label: str = "users") -> bytes | None:
    if not steps:
        return None
    plt = _fig()
    fig, axes = plt.subplots(1, len(catalog.HEADLINE), figsize=(10, 3.4))
    levels = [s["level"] for s in steps]
    for ax, field, title in _headline(axes):
        for q, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ax.plot(levels, [s[field][q] for s in steps], style, label=q)
        ax.set_xlabel(label)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


def tokens_per_step(steps: list[dict[str, Any]], label: str = "users") -> bytes | None:
    if not steps:
        return None
    plt = _fig()
    fig, ax = plt.subplots(figsize=(10, 3.0))
    x = np.arange(len(steps))
    ax.bar(x - 0.2, [s["output_tps"] for s in steps], 0.4, label="output tok/s")
    ax.bar(x + 0.2, [s["total_tps"] for s in steps], 0.4, label="total tok/s")
    ax.set_xticks(x, [f'{s["level"]:g}' for s in steps])
    ax.set_xlabel(label)
    ax.set_title("Tokens per second per step")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    return _png(fig)


def errors_per_step(steps: list[dict[str, Any]], label: str = "users") -> bytes | None:
    kinds = sorted({k for s in steps for k in s["errors_by_status"]})
    if not steps or not kinds:
        return None  # nothing failed: no chart
    plt = _fig()
    fig, ax = plt.subplots(figsize=(10, 2.8))
    x = np.arange(len(steps))
    bottom = np.zeros(len(steps))
    for k in kinds:
        vals = np.array([s["errors_by_status"].get(k, 0) for s in steps], dtype=float)
        ax.bar(x, vals, bottom=bottom, label=k)
        bottom += vals
    ax.set_xticks(x, [f'{s["level"]:g}' for s in steps])
    ax.set_xlabel(label)
    ax.set_title("Failed requests per step")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    return _png(fig)


def ttft_over_time(df: pd.DataFrame) -> bytes | None:
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
    fig, ax = plt.subplots(figsize=(10, 3.0))
    ax.plot(q.index, q[0.5], label="TTFT p50")
    ax.plot(q.index, q[0.95], label="TTFT p95")
    ax.set_xlabel("seconds since the first request (by start time)")
    ax.set_ylabel("ms")
    ax2 = ax.twinx()
    ax2.step(users.index, users.values, where="post", color="#7f7f7f", alpha=0.6, label="users")
    ax2.set_ylabel("users")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title("TTFT over time")
    ax.grid(alpha=0.3)
    return _png(fig)


def compare_curves(series: list[tuple[str, list[dict[str, Any]], dict[str, Any]]], slos: list[Any],
                   label: str = "users") -> bytes | None:
    """Every run's headline p95s (TTFT, TPOT) against req/s on one pair of axes, SLO limits as lines,
    each run's capacity step starred. ``series``: (run label, its steps, its capacity)."""
    if not any(steps for _, steps, _ in series):
        return None
    plt = _fig()
    fig, axes = plt.subplots(1, len(catalog.HEADLINE), figsize=(10, 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, field, title in _headline(axes, "p95"):
        for i, (name, steps, cap) in enumerate(series):
            pts = sorted(((s["rps"], s[field]["p95"], s) for s in steps if s[field]["p95"] is not None),
                         key=lambda p: p[0])
            if not pts:
                continue
            color = colors[i % len(colors)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=name)
            for x, y, s in pts:
                ax.annotate(f'{s["level"]:g}', (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
                if s["start_time"] == cap.get("start_time"):
                    ax.plot([x], [y], "*", ms=14, color=color)
        for slo in slos:
            if slo.column == field and slo.stat == "p95":
                ax.axhline(slo.limit, color="#d62728", ls="--", lw=1, label=f"SLO {slo.metric}")
        ax.set_xlabel("requests/s (ok, edge-corrected)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Throughput vs latency per run (point labels: {label}; ★ capacity)", fontsize=10)
    return _png(fig)
