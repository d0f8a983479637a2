"""The report's and compare's charts: inline SVG at the page's width, value axes from zero, hollow
points for steps without a verdict, point labels that never overlap, and the KV cache in percent."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from llmload.metrics.slo import parse_slo
from llmload.report import chart_parts, charts
from llmload.report.compare.compare_runs import COLUMNS
from llmload.report.document import Block, render_html

SVG = "{http://www.w3.org/2000/svg}"


def step(level, rps, ttft, tpot, thin=False, start=None):
    pq = {"p50": ttft * 0.9, "p95": ttft, "p99": ttft * 1.05}
    return {"level": level, "users": level, "rps": rps, "thin": thin, "start_time": float(start or level),
            "ttft_ms": pq, "tpot_ms": {"p50": tpot, "p95": tpot, "p99": tpot}, "output_tps": rps * 30,
            "total_tps": rps * 80, "errors_by_status": {}}


def ticks(svg: str, axis_id: str) -> list[str]:
    root = ET.fromstring(svg)
    axis = next(g for g in root.iter(f"{SVG}g") if g.get("id") == axis_id)
    return [t.text for g in axis.iter(f"{SVG}g") if "tick" in (g.get("id") or "") for t in g.iter(f"{SVG}text")]


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


# TPOT moves by 0.2 ms around 28.6 ms: drawn from zero, not on a 28.5–28.7 axis that makes it look steep
STEPS = [step(4, 3.0, 40, 28.5, thin=True), step(8, 6.0, 41, 28.55), step(16, 12.0, 45, 28.6),
         step(32, 20.0, 300, 28.65), step(48, 21.0, 900, 28.7), step(64, 21.2, 1500, 28.7)]


def test_the_charts_are_responsive_svg_with_text_and_their_axes_start_at_zero():
    svg = charts.throughput_latency(STEPS, [parse_slo("ttft_p95_ms=1000")], {"start_time": 32.0})
    root = ET.fromstring(svg)
    assert root.get("viewBox") and root.get("width") is None and root.get("height") is None
    assert root.get("class") == "chart"
    for panel in (0, 1):  # TTFT, TPOT: value and load axes from zero, at least 4 labelled ticks
        for axis in ("x", "y"):
            labels = ticks(svg, f"axis-{axis}-throughput_latency-{panel}")
            assert len(labels) >= 4 and float(labels[0].replace("−", "-")) == 0.0, (axis, panel, labels)
    # the same input draws the same bytes (ids seeded by the chart's key), so reports are reproducible
    assert charts.throughput_latency(STEPS, [], {"start_time": 32.0}) == \
        charts.throughput_latency(STEPS, [], {"start_time": 32.0})
    for draw in (charts.percentiles_per_step(STEPS), charts.compare_curves([("a", STEPS, {})], [])):
        assert float(ticks(draw, draw and f"axis-y-{ET.fromstring(draw).get('data-chart')}-1")[0]) == 0.0


def test_a_step_without_a_verdict_is_hollow_and_the_legend_says_so():
    svg = charts.throughput_latency(STEPS, [], {})
    assert chart_parts.HOLLOW_LABEL in texts(svg)
    assert 'fill: #ffffff' in svg.split('id="axes_1"')[1]  # the hollow mark: white inside
    solid = [dict(s, thin=False) for s in STEPS]
    assert chart_parts.HOLLOW_LABEL not in texts(charts.throughput_latency(solid, [], {}))
    assert chart_parts.HOLLOW_LABEL in texts(charts.percentiles_per_step(STEPS))
    assert chart_parts.HOLLOW_LABEL in texts(charts.tokens_per_step(STEPS))


def test_point_labels_never_overlap_and_stay_inside_the_axes():
    plt = chart_parts.figure_lib()
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    xs = [20.0 + i * 0.01 for i in range(12)]  # twelve steps at almost the same req/s: labels must be left out
    ax.plot(xs, [100 + i * 0.1 for i in range(12)], "o")
    ax.set_xlim(0, 40)
    ax.set_ylim(0, 200)
    renderer = chart_parts.laid_out(fig)
    items = [(x, 100 + i * 0.1, str(i), i == 11, "k") for i, x in enumerate(xs)]
    left_out = chart_parts.place_labels(renderer, ax, items)
    boxes = [a.get_window_extent(renderer) for a in ax.texts]
    assert 0 < left_out < 12 and len(boxes) == 12 - left_out
    assert "11" in [a.get_text() for a in ax.texts]  # the important label is placed first
    frame = ax.get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
        assert not any(a.overlaps(b) for b in boxes[i + 1:])
    plt.close(fig)


def test_category_ticks_are_thinned_and_keep_the_last():
    plt = chart_parts.figure_lib()
    fig, ax = plt.subplots()
    labels = [str(4 * (i + 1)) for i in range(40)]
    chart_parts.thin_categories(ax, list(range(40)), labels)
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert 4 <= len(shown) <= 16 and shown[0] == "4" and shown[-1] == "160"
    chart_parts.thin_categories(ax, list(range(6)), labels[:6])
    assert [t.get_text() for t in ax.get_xticklabels()] == labels[:6]
    plt.close(fig)


def test_each_chart_has_a_caption_saying_what_a_point_is():
    html = render_html([Block("Charts", 2, chart="curves", caption=charts.CAPTIONS["curves"].format(label="users"))],
                       {"curves": "<svg class=\"chart\"></svg>"})
    assert "<figure><svg class=\"chart\"></svg><figcaption>One point is one measured step of a run" in html
    assert all("One " in c for c in charts.CAPTIONS.values())


def test_the_kv_cache_is_a_percentage_in_compare_as_in_the_report():
    kv = next(c for c in COLUMNS if c.key == "server_kv_usage_max")
    assert kv.title.endswith("(%)") and kv.fmt(0.818) == "82" and kv.fmt(None) == "–"


def test_failed_request_counts_have_whole_ticks():
    svg = charts.errors_per_step([dict(s, errors_by_status={"http_error": 1 + i % 2}) for i, s in enumerate(STEPS)])
    assert ticks(svg, "axis-y-errors-0") == ["0", "1", "2"]
    assert charts.errors_per_step(STEPS) is None  # nothing failed: no chart


def test_ttft_over_time_draws_the_users_under_the_ttft_lines():
    """The twin axis of the users was drawn after the TTFT axis, its steps over the TTFT lines
    (issue 32, item 16): in the SVG, what comes later is drawn on top."""
    import pandas as pd

    t = [1000.0 + i * 0.25 for i in range(80)]
    df = pd.DataFrame({"start_time": t, "ok": [True] * 80, "ttft_ms": [40.0 + (i % 7) for i in range(80)],
                       "users": [4 if i < 40 else 8 for i in range(80)]})
    svg = charts.ttft_over_time(df)
    ids = [g.get("id") for g in ET.fromstring(svg).iter(f"{SVG}g") if (g.get("id") or "").startswith("ttft_time-")]
    assert ids.index("ttft_time-users") < ids.index("ttft_time-p50") < ids.index("ttft_time-p95"), ids
