"""Screenshots and layout checks of a page in headless Chromium (Selenium), from the page's own layout boxes.

Usage::

    driver = chromium(tmp_path)                       # 1280 x 800, headless
    shoot(driver, "file:///.../report.html", SCREENSHOTS / "report.png")
    assert horizontal_overflow(driver) == 0
    assert len(axis_tick_labels(driver, "#axis-x-curves-0")) >= 4
    assert overlapping_text(driver) == []

Every check runs in the page (``getBoundingClientRect``), so it holds whatever fonts the
machine has: what is measured is what was drawn.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tests.support.browser import CHROMEDRIVER, CHROMIUM, wait_for
from tests.support.processes import ROOT

SCREENSHOTS = Path(ROOT) / "build" / "screenshots"
"""Where the screenshot tests save their PNGs (CI keeps the folder as an artefact)."""

TEXT_SELECTOR = "text, span, td, th, label, h1, h2, h3, p, li"


def chromium(profile_dir: Path, width: int = 1280, height: int = 800) -> Any:
    """A headless Chromium through chromedriver, its window ``width`` x ``height``, a profile of its own."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={width},{height}",
                 f"--user-data-dir={profile_dir}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _viewport(driver: Any, width: int, height: int) -> None:
    """Make the page's viewport (not the window with its frame) ``width`` x ``height``."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(width + (width - inner[0]), height + (height - inner[1]))


def shoot(driver_or_page: Any, url: str, png_path: Path, width: int = 1280, height: int = 800) -> None:
    """Load ``url`` (``""``: keep the page open) at a ``width`` x ``height`` viewport, wait until it has
    loaded (fonts too), and save the whole page's height as a PNG at ``png_path`` (its folder is made)."""
    driver = driver_or_page
    _viewport(driver, width, height)
    if url and driver.current_url != url:  # "": the page already open (a live page mid-run)
        driver.get(url)
    wait_for(lambda: driver.execute_script("return document.readyState") == "complete", timeout=60)
    driver.execute_script("return document.fonts.ready.then(() => true)")
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    # The whole page, not only the viewport: Chromium renders beyond it for the shot, the layout stays.
    w, h = driver.execute_script("const e = document.scrollingElement; return [e.scrollWidth, e.scrollHeight]")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": max(w, width), "height": max(h, height), "scale": 1}})
    png_path.write_bytes(base64.b64decode(shot["data"]))


def horizontal_overflow(driver: Any, boxes: bool = False) -> int:
    """How many CSS pixels the page is wider than its viewport (it scrolls sideways): 0 when it does not.
    With ``boxes``, also every box that scrolls sideways on its own (a table in a scrolling container)."""
    return max(0, int(driver.execute_script("""
        const doc = document.scrollingElement || document.documentElement;
        let worst = doc.scrollWidth - doc.clientWidth;
        if (arguments[0]) {
            for (const el of document.querySelectorAll('*')) {
                const s = getComputedStyle(el);
                if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && el.clientWidth > 0)
                    worst = Math.max(worst, el.scrollWidth - el.clientWidth);
            }
        }
        return worst;
    """, boxes)))


_TICKS_JS = """
const out = [];
for (const axis of document.querySelectorAll(arguments[0])) {
  const seen = new Set();
  // an axis of SVG ticks (text.tick, g.tick text), else the matched labels themselves (HTML over a canvas)
  let labels = [...axis.querySelectorAll("text.tick, .tick text, [id*='tick'] text, [class*='tick'] text")];
  if (!labels.length)
    labels = axis.children.length ? [...axis.querySelectorAll('*')].filter(e => !e.children.length) : [axis];
  for (const t of labels) {
    if (seen.has(t)) continue;
    seen.add(t);
    const r = t.getBoundingClientRect(), s = getComputedStyle(t);
    const text = (t.textContent || "").trim();
    if (text && r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none"
        && parseFloat(s.opacity || "1") > 0) out.push(text);
  }
}
return out;
"""


def axis_tick_labels(driver: Any, axis_selector: str) -> list[str]:
    """The visible, non-empty tick label texts of every element ``axis_selector`` matches, in document
    order (one list for all of them: pass a selector of one axis to count that axis's ticks). A tick
    label is a ``text.tick``, or a text inside an element whose class or id names a tick (d3's
    ``g.tick``, matplotlib's ``g#xtick_1``); an axis without such texts (labels laid over a canvas)
    counts the matched elements' own texts."""
    return list(driver.execute_script(_TICKS_JS, axis_selector))


_OVERLAP_JS = """
const els = [...document.querySelectorAll(arguments[0])];
const own = el => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
const boxes = [];
for (const e of els) {
  const s = getComputedStyle(e);
  const text = (e.textContent || "").trim();
  if (!text || s.visibility === "hidden" || s.display === "none" || parseFloat(s.opacity || "1") === 0) continue;
  if (arguments[2] && !own(e)) continue;
  let r = e.getBoundingClientRect();
  if (arguments[2]) {  // the words' own box: a cell can be wider than the words in it
    const range = document.createRange();
    range.selectNodeContents(e);
    r = range.getBoundingClientRect();
  }
  if (r.width <= 0 || r.height <= 0) continue;
  boxes.push([e, text.slice(0, 60), r]);
}
const tol = arguments[1], out = [];
for (let i = 0; i < boxes.length; i++) {
  for (let j = i + 1; j < boxes.length; j++) {
    const [a, ta, ra] = boxes[i], [b, tb, rb] = boxes[j];
    if (a.contains(b) || b.contains(a)) continue;  // a cell and the text inside it
    const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
    const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
    if (w > tol && h > tol) out.push([ta, tb]);
  }
}
return out;
"""


def overlapping_text(driver: Any, selector: str = TEXT_SELECTOR, tolerance_px: float = 1.0,
                     own_text: bool = False) -> list[tuple[str, str]]:
    """Pairs of text elements (their first 60 characters) whose layout boxes overlap by more than
    ``tolerance_px`` in both directions; an element and one inside it are not a pair, nor are
    adjacent table cells, which share a border (under 1 px). With ``own_text``, only elements with
    text of their own count, each by the box of its words (pages of HTML labels over canvases)."""
    return [tuple(p) for p in driver.execute_script(_OVERLAP_JS, selector, tolerance_px, own_text)]
