"""The report and the comparison as a reader sees them: headless Chromium at 1280 x 800.

Two short step runs against `llmload mock` (16 sequences and 8 sequences a batch, so the second
queues from 9 users on), `llmload report` on the first and `llmload compare` on both; then, from
the page's own layout boxes: no sideways scroll, every time or load axis with at least 4 labelled
ticks, every value axis from zero, no two texts over each other, the charts as wide as the page, a
caption under each. The PNGs go to build/screenshots/ (CI keeps the folder). Needs /usr/bin/chromium
and /usr/bin/chromedriver (`make browser-deps`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmload.report.chart_parts import HOLLOW_LABEL
from tests.support.browser import CHROMEDRIVER, CHROMIUM
from tests.support.locust_runs import KNOWN_CAPACITY_MOCK, SYNTHETIC
from tests.support.processes import ROOT
from tests.support.screenshots import (
    SCREENSHOTS,
    axis_tick_labels,
    chromium,
    horizontal_overflow,
    overlapping_text,
    shoot,
)

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)) and not os.environ.get("CI"),
    reason="needs chromium and chromedriver (make browser-deps)",
)

# 2 users make ~10 ok requests in a measured step: fewer than the floor of 20, so one step has no
# verdict and is drawn hollow; 24 users queue on the 16-sequence engine, and from 9 on the other.
STEPS = ("--steps", "2,8,16,24", "--step-seconds", "4", "--output-tokens", "30", "--input-tokens", "50",
         "--ignore-eos")
JUDGING = ("--warmup-s", "1", "--sample-floor", "20", "--slo", "ttft_p95_ms=1000")


def llmload(*args: str) -> None:
    res = subprocess.run([sys.executable, "-m", "llmload.cli", *args], capture_output=True, text=True, cwd=ROOT,
                         timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]


def two_runs(mock_factory, tmp_path: Path) -> tuple[Path, Path]:
    """Both runs at once (each against its own mock): about 20 s."""
    prefixes, procs = [], []
    for name, seqs in (("seq16", "16"), ("seq8", "8")):
        mock = mock_factory(*[seqs if a == "16" else a for a in KNOWN_CAPACITY_MOCK])
        prefix = tmp_path / name
        prefixes.append(prefix)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", SYNTHETIC, "--host", mock.url, "--headless", "--csv", str(prefix),
             *STEPS], cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    return prefixes[0], prefixes[1]


def check_page(driver, name: str) -> None:
    """What every report page must hold at 1280 x 800 (``name`` for the messages)."""
    assert horizontal_overflow(driver) == 0, f"{name}: the page scrolls sideways"
    axes = driver.execute_script("return [...document.querySelectorAll(\"svg.chart g[id^='axis-']\")].map(e => e.id)")
    assert axes, f"{name}: no chart axes"
    for axis in axes:
        labels = axis_tick_labels(driver, f"#{axis}")
        if axis.startswith("axis-x-"):  # the time or load axis: readable ticks
            assert len(labels) >= 4, f"{name}: {axis} has {len(labels)} labelled ticks: {labels}"
        else:  # value axes start at zero
            assert labels and float(labels[0].replace("−", "-")) == 0.0, f"{name}: {axis} starts at {labels[:1]}"
    assert overlapping_text(driver) == [], f"{name}: texts over each other"
    charts = driver.execute_script(
        "const body = document.body.getBoundingClientRect().width;"
        "return [...document.querySelectorAll('svg.chart')].map(s => [s.dataset.chart,"
        " s.getBoundingClientRect().width / body, !!s.closest('figure').querySelector('figcaption')])")
    for key, share, captioned in charts:
        assert share > 0.95 and captioned, f"{name}: chart {key} is {share:.0%} of the page wide, caption {captioned}"


def test_report_and_compare_in_chromium(mock_factory, tmp_path):
    first, second = two_runs(mock_factory, tmp_path)
    llmload("report", str(first), *JUDGING, "--out", str(tmp_path / "report"))
    llmload("compare", str(first), str(second), "--label", "16 seqs", "--label", "8 seqs", *JUDGING,
            "--out", str(tmp_path / "compare"))
    driver = chromium(tmp_path / "profile")
    try:
        shoot(driver, (tmp_path / "report" / "report.html").as_uri(), SCREENSHOTS / "report.png")
        check_page(driver, "report")
        keys = driver.execute_script("return [...document.querySelectorAll('svg.chart')].map(s => s.dataset.chart)")
        assert keys == ["throughput_latency", "percentiles", "tokens", "ttft_time"]
        assert HOLLOW_LABEL in driver.find_element("css selector", "svg.chart").text  # the 2-user step

        shoot(driver, (tmp_path / "compare" / "compare.html").as_uri(), SCREENSHOTS / "compare.png")
        check_page(driver, "compare")
        assert "KV-cache usage max at capacity (%)" in driver.find_element("css selector", "body").text
    finally:
        driver.quit()
    for png in ("report.png", "compare.png"):
        assert (SCREENSHOTS / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
