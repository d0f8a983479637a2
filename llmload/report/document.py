"""Documents as a list of blocks (heading, text, table, chart), rendered to Markdown and to HTML
(charts inline, opens offline), so both always say the same thing; and writing files atomically.
The report and ``llmload compare`` both use it.

Usage::

    bl = [Block("Title", 1, text=["Some `code`."]), Block("Table", 2, header=["a", "b"], rows=[["1", "2"]])]
    render_markdown(bl, charts={}, html_name="report.html")
    render_html(bl, charts={"x": "<svg ...>", "y": png_bytes})
    write_files("out/", {"report.md": md, "report.html": html})   # → the paths written
"""

from __future__ import annotations

import base64
import html
import math
import os
from dataclasses import dataclass, field
from typing import Any

from llmload import files

Chart = str | bytes
"""A chart of the HTML: an inline ``<svg>`` (str), or PNG bytes (embedded as a data: URL)."""


@dataclass
class Block:
    heading: str = ""
    level: int = 2
    text: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    chart: str = ""  # key into the charts dict (HTML only)
    caption: str = ""  # under the chart: what one point of it is

    def empty(self, charts: dict[str, Chart | None]) -> bool:
        """Nothing to show: a chart that was not drawn and no text or table (left out, heading too)."""
        return not self.text and not self.rows and not (self.chart and charts.get(self.chart))


def clean(obj: Any) -> Any:
    """JSON without NaN/inf (never valid JSON)."""
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    return obj


def render_markdown(bl: list[Block], charts: dict[str, Chart | None], html_name: str) -> str:
    lines: list[str] = []
    said_charts = False
    for b in bl:
        if b.empty(charts):
            continue
        if b.heading:
            lines += ["#" * b.level + " " + b.heading, ""]
        if b.text:
            lines += [*b.text, ""]
        if b.rows:
            lines.append("| " + " | ".join(b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in b.rows]
            lines.append("")
        if b.chart and charts.get(b.chart) and not said_charts:
            lines += [f"(charts: see {html_name})", ""]
            said_charts = True
    return "\n".join(lines)


# The page takes the window's width (the charts scale with it); a table wider than the window scrolls
# inside its own box, never the page; running text keeps a readable line length.
CSS = """body{font-family:system-ui,sans-serif;margin:1.5em 2.5%;color:#222}
p,ul{max-width:80em}.table{overflow-x:auto;margin:.5em 0 1.5em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3}h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:2px}
figure{margin:1em 0 1.5em}svg.chart{display:block;width:100%;height:auto}img{max-width:100%}
figcaption{font-size:13px;color:#555;max-width:80em;margin-top:.3em}code{background:#f3f3f3;padding:1px 3px}"""


def render_html(bl: list[Block], charts: dict[str, Chart | None], title: str = "llmload report") -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style></head><body>"]
    for b in bl:
        if b.empty(charts):
            continue
        if b.heading:
            parts.append(f"<h{b.level}>{html.escape(b.heading)}</h{b.level}>")
        if b.text:
            items = [t[2:] if t.startswith("- ") else t for t in b.text]
            if all(t.startswith("- ") for t in b.text):
                parts.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>")
            else:
                parts += [f"<p>{_inline(t)}</p>" for t in items]
        if b.rows:
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in b.rows)
            head_row = f"<tr>{head}</tr>" if any(b.header) else ""  # key/value tables need no header
            parts.append(f"<div class='table'><table>{head_row}{body}</table></div>")
        chart = charts.get(b.chart) if b.chart else None
        if chart:
            parts.append(_figure(b.chart, chart, b.caption))
    parts.append("</body></html>")
    return "\n".join(parts)


def _figure(key: str, chart: Chart, caption: str) -> str:
    body = chart if isinstance(chart, str) else \
        f"<img alt='{html.escape(key)}' src='data:image/png;base64,{base64.b64encode(chart).decode()}'>"
    cap = f"<figcaption>{_inline(caption)}</figcaption>" if caption else ""
    return f"<figure>{body}{cap}</figure>"


def _inline(text: str) -> str:
    out = html.escape(text)
    while "`" in out and out.count("`") >= 2:
        out = out.replace("`", "<code>", 1).replace("`", "</code>", 1)
    return out


def write_files(out_dir: str, texts: dict[str, str]) -> list[str]:
    """Write each name → text into ``out_dir`` (each through a temporary file); the paths written."""
    written = []
    for name, text in texts.items():
        path = os.path.join(out_dir, name)
        files.replace_atomically(path, text)
        written.append(path)
    return written
