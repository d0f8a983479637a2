"""What every report and compare chart shares: the figure, its inline SVG, a step's marks (hollow
without a verdict), point labels that never overlap, and category ticks thinned to fit.

The charts are SVG with real ``<text>`` (``svg.fonttype: none``), scaled to the page's width by
their ``viewBox``: sharp at any width, searchable, and measurable by a browser (the screenshot
test reads the labels' layout boxes). Each axis gets an id (``axis-x-KEY-0``) so a test can find
its ticks.

Usage::

    plt = figure_lib()
    fig, axes = plt.subplots(1, 2, figsize=WIDE, layout="constrained")
    step_marks(axes[0], xs, ys, thin, color="C0", label="p95")
    place_labels(laid_out(fig), axes[0], [(x, y, "16", True, "C0") ...])
    svg = svg_of(fig, "throughput_latency")      # "<svg ...>...</svg>", no XML header
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

WIDE = (14.0, 4.2)
"""A full-width chart's size in inches (at 72 pt per inch, about the page's width: the fonts stay their size)."""

HOLLOW_LABEL = "hollow: too few ok requests, no verdict"


def figure_lib() -> Any:
    """pyplot on the Agg backend (no display), with text kept as text in SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    return plt


def name_axes(key: str, axes: Sequence[Any]) -> None:
    """Give each axis of ``axes`` an SVG id: ``axis-x-KEY-i`` and ``axis-y-KEY-i``."""
    for i, ax in enumerate(axes):
        ax.xaxis.set_gid(f"axis-x-{key}-{i}")
        ax.yaxis.set_gid(f"axis-y-{key}-{i}")


def svg_of(fig: Any, key: str) -> str:
    """The figure as an inline ``<svg>`` that takes the width of its container (``viewBox``, no fixed size).
    ``key`` seeds the element ids, so two charts of one page never share one and a report is reproducible."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": key, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    figure_lib().close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]  # no XML declaration or doctype inside HTML
    head_end = svg.index(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", svg[:head_end])
    head += f' class="chart" data-chart="{key}" preserveAspectRatio="xMidYMid meet" role="img"'
    return head + svg[head_end:]


def step_marks(ax: Any, xs: Sequence[float], ys: Sequence[float | None], thin: Sequence[bool], color: str,
               marker: str = "o", line: str = "-", label: str | None = None, size: float = 6) -> None:
    """A line through the steps' points, each point filled, or hollow (white inside) when its step has no
    verdict (``thin``). Points with no value are left out."""
    pts = [(x, y, t) for x, y, t in zip(xs, ys, thin, strict=True) if y is not None]
    if not pts:
        return
    ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=line, color=color, label=label, marker=marker, ms=size,
            markevery=[i for i, p in enumerate(pts) if not p[2]])
    hollow = [p for p in pts if p[2]]
    if hollow:
        ax.plot([p[0] for p in hollow], [p[1] for p in hollow], ls="none", marker=marker, ms=size, mfc="white",
                mec=color, mew=1.5, zorder=3)


def hollow_handle(plt: Any, bar: bool = False) -> Any:
    """A legend entry that says what a hollow point (or, with ``bar``, a hollow bar) means."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if bar:
        return Patch(facecolor="white", edgecolor="#555555", linewidth=1.2, label=HOLLOW_LABEL)
    return Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="#555555", mew=1.5, label=HOLLOW_LABEL)


def bar_handle(color: str, label: str) -> Any:
    """A filled legend entry for a series of bars (the bars' own would copy the first bar, hollow or not)."""
    from matplotlib.patches import Patch

    return Patch(facecolor=color, edgecolor=color, label=label)


def figure_legend(fig: Any, axes: Sequence[Any], extra: Sequence[Any] = ()) -> None:
    """One legend for the whole figure, under its panels (never over a point): every labelled line once."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)
    for h in extra:
        handles.append(h)
        labels.append(h.get_label())
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(handles), 6), frameon=False,
                   fontsize=9)


def laid_out(fig: Any) -> Any:
    """Draw the complete figure once (the layout puts the axes in their final place); its renderer, for
    :func:`place_labels`."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def place_labels(renderer: Any, ax: Any, items: Sequence[tuple[float, float | None, str, bool, str]],
                 pad_px: float = 2.0, fontsize: float = 8) -> int:
    """Label points of ``ax`` with text (a step's level) where a label fits: up-right of its point, else
    up-left, down-right or down-left; never over another label, never outside the axes. ``items``: (x, y, text,
    important, color); important labels are placed first (the capacity step, the ends). Returns how many were
    left out. ``renderer``: from :func:`laid_out`, called on the otherwise complete figure."""
    box = ax.get_window_extent(renderer)
    kept: list[Any] = []
    left_out = 0
    offsets = (((4, 4), "left", "bottom"), ((-4, 4), "right", "bottom"), ((4, -4), "left", "top"),
               ((-4, -4), "right", "top"))
    for x, y, text, _, color in sorted(items, key=lambda it: not it[3]):
        if y is None:
            continue
        placed = False
        for off, ha, va in offsets:
            ann = ax.annotate(text, (x, y), textcoords="offset points", xytext=off, ha=ha, va=va,
                              fontsize=fontsize, color=color)
            ext = ann.get_window_extent(renderer).expanded(1.0, 1.0).padded(pad_px)
            inside = box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1
            if inside and not any(ext.overlaps(k) for k in kept):
                kept.append(ext)
                placed = True
                break
            ann.remove()
        left_out += not placed
    return left_out


def thin_categories(ax: Any, positions: Sequence[float], labels: Sequence[str], max_labels: int = 16) -> None:
    """Category ticks at ``positions``, every k-th one labelled so at most ``max_labels`` show (the last always)."""
    n = len(labels)
    every = max(1, -(-n // max_labels))
    keep = [i for i in range(n) if i % every == 0 or i == n - 1]
    if len(keep) > 1 and keep[-1] - keep[-2] < every:  # the last one would crowd its neighbour
        keep.pop(-2)
    ax.set_xticks([positions[i] for i in keep], [labels[i] for i in keep])
