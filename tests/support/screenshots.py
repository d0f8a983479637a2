"""Screenshots and layout checks for the web pages (report, compare, LLM tab, dashboard), read from
the page's own layout boxes in headless Chromium (Selenium). The PNGs go to ``build/screenshots/``
(CI keeps that folder as an artefact).

Usage::

    shoot(driver, url, SCREENSHOTS / "dashboard.png")       # 1280 x 800
    assert horizontal_overflow(driver) == 0
    assert len(axis_tick_labels(driver, "#chart-ttft .tick.x")) >= 4
    assert overlapping_text(driver) == []
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support.processes import ROOT

SCREENSHOTS = Path(ROOT) / "build" / "screenshots"


def shoot(driver_or_page: Any, url: str, png_path: Path, width: int = 1280, height: int = 800) -> None:
    """Open ``url`` (unless it is open already) in a ``width`` x ``height`` viewport and save a PNG."""
    driver = driver_or_page
    driver.set_window_size(width, height)
    # the window's outer size includes no chrome in headless mode, but make the viewport exact
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    if inner != [width, height]:
        driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])
    if url and driver.current_url != url:
        driver.get(url)
    os.makedirs(os.path.dirname(os.path.abspath(png_path)), exist_ok=True)
    driver.save_screenshot(str(png_path))


def horizontal_overflow(driver: Any) -> int:
    """How many CSS pixels the page (or its widest scrolling box) is wider than the viewport: 0 is no
    horizontal scroll bar anywhere."""
    return int(driver.execute_script("""
        const doc = document.scrollingElement || document.documentElement;
        let worst = doc.scrollWidth - doc.clientWidth;
        for (const el of document.querySelectorAll('*')) {
            const s = getComputedStyle(el);
            if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && el.clientWidth > 0)
                worst = Math.max(worst, el.scrollWidth - el.clientWidth);
        }
        return Math.max(0, worst);
    """))


def axis_tick_labels(driver: Any, axis_selector: str) -> list[str]:
    """The visible, non-empty tick labels of an axis: the texts of the elements ``axis_selector`` matches
    (or, for a matched element with children, of its leaf elements), in document order."""
    return list(driver.execute_script("""
        const out = [];
        for (const el of document.querySelectorAll(arguments[0])) {
            const leaves = el.children.length ? [...el.querySelectorAll('*')].filter(e => !e.children.length) : [el];
            for (const leaf of leaves) {
                const r = leaf.getBoundingClientRect(), text = (leaf.textContent || '').trim();
                if (text && r.width > 0 && r.height > 0) out.push(text);
            }
        }
        return out;
    """, axis_selector))


def overlapping_text(driver: Any,
                     selector: str = "text, span, td, th, label, h1, h2, h3, p, li") -> list[tuple[str, str]]:
    """Pairs of visible elements with text of their own whose layout boxes overlap (by more than 1 px each
    way); an element and one inside it are not a pair. Each pair as (text of one, text of the other)."""
    return [tuple(p) for p in driver.execute_script("""
        const own = el => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
        const boxes = [];
        for (const el of document.querySelectorAll(arguments[0])) {
            if (!own(el)) continue;
            const s = getComputedStyle(el);
            if (s.visibility === 'hidden' || s.display === 'none' || Number(s.opacity) === 0) continue;
            // the text's own box: an element can be wider than the words in it (a table cell)
            const range = document.createRange();
            range.selectNodeContents(el);
            const r = range.getBoundingClientRect();
            if (r.width > 0 && r.height > 0) boxes.push([el, r]);
        }
        const out = [];
        for (let i = 0; i < boxes.length; i++) {
            for (let j = i + 1; j < boxes.length; j++) {
                const [a, ra] = boxes[i], [b, rb] = boxes[j];
                if (a.contains(b) || b.contains(a)) continue;
                const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
                const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
                if (w > 1 && h > 1) out.push([a.textContent.trim().slice(0, 60), b.textContent.trim().slice(0, 60)]);
            }
        }
        return out;
    """, selector)]
