"""The calibration as an HTML page: for each tolerance, its error p99 and its in-tolerance share
against streams per process (and the tok/s they streamed), the limit marked. Pure: the text of
one self-contained page (inline SVG, no script, nothing fetched), two charts a row, readable at
1,280 px.

Usage::

    html = render_page(result)     # the dict `llmload calibrate` writes as JSON
"""

from __future__ import annotations

import html
import math
from typing import Any

W, H = 580, 300  # two a row inside 1,280 px, a scroll bar included
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 46, 58  # the top margin holds the title and, under it, the limit's label
ERROR_FLOOR_MS = 0.001  # the error axis is logarithmic: a perfect 0 is drawn here
MIN_TICK_PX = 14.0  # a label is 12 px tall: closer ones overlap
CHAR_PX = 8.0  # a generous width of one character of a 12-px label, to tell whether it fits


def _x_scale(streams: list[int]) -> Any:
    lo, hi = math.log2(min(streams)), math.log2(max(streams))
    span = max(hi - lo, 1e-9)
    return lambda s: LEFT + (math.log2(s) - lo) / span * (W - LEFT - RIGHT) if hi > lo else (LEFT + W - RIGHT) / 2


def _tps(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"


def _chart(title: str, points: list[dict[str, Any]], key: str, log: bool, line: float, line_label: str,
           limit: int, y_label: str, scale: float = 1.0) -> str:
    pts = [p for p in points if p.get(key) is not None]
    out = [f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{html.escape(title)}">',
           f'<text x="{LEFT}" y="18" class="t">{html.escape(title)}</text>']
    if not pts:
        return "".join(out) + f'<text x="{LEFT}" y="{H / 2}">no data</text></svg>'
    x = _x_scale([p["streams"] for p in points])
    values = [p[key] * scale for p in pts] + [line]
    if log:
        # down to a whole decade: the lowest point sits on or above a labelled tick, never below the last one
        vmin = math.floor(math.log10(max(min(min(values), line / 10), ERROR_FLOOR_MS)))
        vmax = math.log10(max(max(values), line * 2))
        conv = lambda v: math.log10(max(v, ERROR_FLOOR_MS))  # noqa: E731
    else:
        vmin, vmax = min(min(values), line) - 0.5, 100.0
        conv = float
    span = max(vmax - vmin, 1e-9)
    y = lambda v: TOP + (vmax - conv(v)) / span * (H - TOP - BOTTOM)  # noqa: E731
    # axes, y ticks
    out.append(f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" class="ax"/>'
               f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" class="ax"/>')
    if log:
        ticks = [10 ** e for e in range(math.floor(vmin), math.ceil(vmax) + 1) if vmin <= e <= vmax]
    else:  # from 100 down, each label at least MIN_TICK_PX below the last (a --share of 50 % spans 50 points)
        ticks = []
        for v in (100, 99, 98, 96, 94, 92, 90, 80, 70, 60, 50, 40, 30, 20, 10, 0):
            if vmin <= v <= vmax and (not ticks or y(v) - y(ticks[-1]) >= MIN_TICK_PX):
                ticks.append(v)
    for t in ticks:
        out.append(f'<line x1="{LEFT - 4}" y1="{y(t):.1f}" x2="{W - RIGHT}" y2="{y(t):.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})" '
               f'text-anchor="middle">{html.escape(y_label)}</text>')
    for p in points:  # x ticks: streams, and the tok/s they streamed
        px = x(p["streams"])
        out.append(f'<text x="{px:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{p["streams"]}</text>'
                   f'<text x="{px:.1f}" y="{H - BOTTOM + 30}" text-anchor="middle" class="s">'
                   f'{_tps(p.get("tps_per_process"))}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">streams per process '
               '(tok/s per process below)</text>')
    # the tolerance, the limit, the curve
    out.append(f'<line x1="{LEFT}" y1="{y(line):.1f}" x2="{W - RIGHT}" y2="{y(line):.1f}" class="tol"/>'
               f'<text x="{W - RIGHT - 4}" y="{y(line) - 5:.1f}" text-anchor="end" class="tl">'
               f'{html.escape(line_label)}</text>')
    if limit > 0:
        lx = x(limit)
        text = f"limit {limit}"
        # above the plot, clear of the curve and the tolerance's label: right of its line, unless it would
        # run past the chart (the limit is the last point), then left of it
        left = lx + 4 + CHAR_PX * len(text) > W - RIGHT
        out.append(f'<line x1="{lx:.1f}" y1="{TOP - 4}" x2="{lx:.1f}" y2="{H - BOTTOM}" class="lim"/>'
                   f'<text x="{lx - 4 if left else lx + 4:.1f}" y="{TOP - 8}" '
                   f'text-anchor="{"end" if left else "start"}" class="ll">{text}</text>')
    path = " ".join(f"{x(p['streams']):.1f},{y(p[key] * scale):.1f}" for p in pts)
    out.append(f'<polyline points="{path}" class="c"/>')
    for p in pts:
        out.append(f'<circle cx="{x(p["streams"]):.1f}" cy="{y(p[key] * scale):.1f}" r="4" '
                   f'class="{"ok" if p["ok"] else "bad"}"><title>{p["streams"]} streams: '
                   f'{p[key] * scale:.4g}</title></circle>')
    return "".join(out) + "</svg>"


STYLE = """body{font:14px system-ui,sans-serif;margin:24px;max-width:1260px;color:#222}
svg{background:#fff;border:1px solid #ddd;margin:0 8px 8px 0}svg text{font-size:12px;fill:#333}
.t{font-weight:600;font-size:13px}.s{fill:#777;font-size:11px}.ax{stroke:#444}.grid{stroke:#eee}
.tol{stroke:#c62828;stroke-dasharray:6 4}.tl{fill:#c62828}.lim{stroke:#2e7d32;stroke-width:2}.ll{fill:#2e7d32}
.c{fill:none;stroke:#1565c0;stroke-width:2}.ok{fill:#1565c0}.bad{fill:#fff;stroke:#c62828;stroke-width:2}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}
th{background:#f5f5f5}td.l{text-align:left}"""

TABLE = (("streams", "streams", 0), ("tps_per_process", "tok/s", 0), ("ttft_err_p99_ms", "TTFT err p99", 3),
         ("itl_max_err_p99_ms", "itl_max err p99", 3), ("share", "in tolerance", None), ("lag_p99_ms", "lag p99", 1),
         ("stall_cpu_max_ms", "stall CPU max", 1), ("coalesced_share", "coalesced", None))


def _cell(v: Any, digits: int | None) -> str:
    if v is None:
        return "-"
    return f"{v * 100:.2f} %" if digits is None else f"{v:,.{digits}f}"


def _repeats(n: int) -> str:
    return f"{n} repeat" if n == 1 else f"{n} repeats"


def render_page(result: dict[str, Any]) -> str:
    tol = result["tolerances"]
    per = result["per_process"]
    points = result["curve"]
    limit = int(per["max_streams"])
    share_pct = tol["share"] * 100
    charts = [
        _chart("TTFT error p99 (ms)", points, "ttft_err_p99_ms", True, tol["ttft_error_ms"],
               f"tolerance {tol['ttft_error_ms']:g} ms", limit, "ms (log)"),
        _chart("Requests with TTFT within tolerance (%)", points, "ttft_share", False, share_pct,
               f"--share {share_pct:g} %", limit, "%", 100.0),
        _chart("itl_max error p99 (ms)", points, "itl_max_err_p99_ms", True, tol["itl_max_error_ms"],
               f"tolerance {tol['itl_max_error_ms']:g} ms", limit, "ms (log)"),
        _chart("Requests with itl_max within tolerance (%)", points, "itl_max_share", False, share_pct,
               f"--share {share_pct:g} %", limit, "%", 100.0),
    ]
    rows = "".join("<tr>" + "".join(f"<td>{_cell(p.get(k), d)}</td>" for k, _, d in TABLE)
                   + f"<td class=l>{'ok' if p['ok'] else 'out of tolerance'}</td></tr>" for p in points)
    head = "".join(f"<th>{label}</th>" for _, label, _ in TABLE) + "<th>verdict</th>"
    summary = "<br>".join(html.escape(x) for x in result.get("summary", []))
    return (f"<!doctype html><html><head><meta charset=utf-8><title>llmload calibrate: {html.escape(result['host'])}"
            f"</title><style>{STYLE}</style></head><body><h1>llmload calibrate</h1>"
            f"<p>{html.escape(result['host'])}, {html.escape(result['cpu_model'])}, {result['cores']} cores; "
            f"{html.escape(result['measured_at'])}; tolerances: {html.escape(result['tolerance'])}; "
            f"{_repeats(result['settings']['repeats'])} per step (medians).</p><p><b>{summary}</b></p>"
            f"<div>{''.join(charts)}</div><h2>Steps</h2><table><tr>{head}</tr>{rows}</table></body></html>\n")
