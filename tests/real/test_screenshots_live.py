"""Screenshots of the live dashboard and the LLM tabs (issue 25): a real Locust run against the mock,
headless Chromium at 1280 x 800, during the run and after Stop. Checks no horizontal scroll, at
least 4 labelled ticks on every time axis, one time span on every panel, hover values, no text boxes
overlapping (the page's own layout boxes), and the stopped state. The PNGs go to build/screenshots/.
Needs /usr/bin/chromium and /usr/bin/chromedriver (`make test` installs them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

from llmload.metrics import catalog
from llmload.plugin.web import llm_tab
from tests.support.browser import CHROMEDRIVER, CHROMIUM, wait_for
from tests.support.processes import ROOT, end_process, free_port
from tests.support.screenshots import SCREENSHOTS, axis_tick_labels, horizontal_overflow, overlapping_text, shoot

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)) and not os.environ.get("CI"),
    reason="needs chromium and chromedriver (apt-get install chromium chromium-driver; make test does it)",
)
SIGNIFICANT = re.compile(r"([1-9]\d{2,}|[1-9]\.\d\d|[1-9]\d\.\d|0\.0*[1-9]\d\d|0)")  # 3 significant digits, or 0
# The LLM tabs get numbers (JSON) and Locust's page prints them as JavaScript does: 2 for 2.00
AT_MOST_3 = re.compile(r"([1-9]\d*|[1-9]\.\d{1,2}|[1-9]\d\.\d|0\.0*[1-9]\d{0,2}|0)")


def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                 "--window-size=1280,800", f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def post(url: str, form: dict[str, str]) -> int:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=10) as r:
        return r.status


CHART_DATA = """
return [...window.llmload.charts].map(([id, c]) => ({
    id, xmin: c.u.scales.x.min, xmax: c.u.scales.x.max,
    points: c.u.data.slice(1).map(ys => ys.filter(v => v !== null).length),
    dashes: c.u.series.slice(1).map(s => (s.dash || []).join(","))}));
"""


def check_dashboard(driver, png, running: bool) -> list[dict]:
    from selenium.webdriver.common.by import By

    shoot(driver, "", SCREENSHOTS / png)
    assert horizontal_overflow(driver, boxes=True) == 0
    charts = driver.execute_script(CHART_DATA)
    # TTFT visible is TTFT exactly for these workloads (no reasoning): no panel of its own (issue 32, item 16)
    plain = [c for c in catalog.dashboard_spec() if not c["differs_from"]]
    assert len(charts) == len(plain) + 3 + 3, [c["id"] for c in charts]
    # one time span on every panel, client and server
    assert len({(c["xmin"], c["xmax"]) for c in charts}) == 1, charts
    for c in charts:
        ticks = axis_tick_labels(driver, f"#{c['id']} .tick.x")
        assert len(ticks) >= 4 and len(set(ticks)) == len(ticks), (c["id"], ticks)
        assert all(re.fullmatch(r"\d+:\d\d(:\d\d)?", t) for t in ticks), ticks
        assert len(axis_tick_labels(driver, f"#{c['id']} .tick.y")) >= 3, c["id"]
        # series that can coincide are drawn apart: no two with the same dash
        assert len(set(c["dashes"])) == len(c["dashes"]), c
    assert overlapping_text(driver, own_text=True) == []
    state = driver.find_element(By.ID, "state").text
    assert state == ("running" if running else "stopped"), state
    return charts


def hover_values(driver, chart_id: str) -> list[str]:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    over = driver.find_element(By.CSS_SELECTOR, f"#{chart_id} .u-over")
    ActionChains(driver).move_to_element_with_offset(over, over.size["width"] // 2 - 2, 0).perform()
    return [v.text for v in driver.find_elements(By.CSS_SELECTOR, f"#{chart_id} .u-legend .u-value")]


def llm_table(driver, title: str) -> tuple[list[str], list[list[str]]]:
    from selenium.webdriver.common.by import By

    wait_for(lambda: [t for t in driver.find_elements(By.CSS_SELECTOR, "[role='tab']")
                      if t.text.strip().upper() == title.upper()])[0].click()
    heads = wait_for(lambda: (h := [th.text for th in driver.find_elements(By.CSS_SELECTOR, "table thead th")])
                     and h[0] == "Scenario" and h)
    body = [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, "table tbody tr")]
    return heads, body


def check_tab(driver, png: str, title: str, columns: list[tuple[str, str]]) -> list[dict[str, str]]:
    heads, body = llm_table(driver, title)
    shoot(driver, "", SCREENSHOTS / png)
    assert horizontal_overflow(driver, boxes=True) == 0
    assert heads == [t for _, t in columns]
    assert overlapping_text(driver, own_text=True) == []
    return [dict(zip(heads, cells, strict=True)) for cells in body if cells]


def test_dashboard_and_llm_tabs_at_1280_during_the_run_and_after_stop(mock_factory, tmp_path):
    from selenium.webdriver.common.by import By

    # vllm-v1: a KV cache and prefix caching; the product mix (chat, rag with shared prefixes, sharegpt):
    # three scenarios and Aggregated in the tabs, and prefix-cache hits to draw
    mock = mock_factory()
    port = free_port()
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "mixed.py"), "--host", mock.url,
         "--web-host", "127.0.0.1", "--web-port", str(port), "--csv", str(tmp_path / "ui"),
         "--server-metrics-interval", "1"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        wait_for(lambda: urllib.request.urlopen(base + "/", timeout=2).status == 200)
        assert post(base + "/swarm", {"user_count": "6", "spawn_rate": "6", "host": mock.url}) == 200
        # 10 samples of the live window (one every 2 s): 20 s of lines to look at
        wait_for(lambda: len({r["time"] for r in json.loads(urllib.request.urlopen(
            base + "/llmload/history.json", timeout=5).read())["rows"]}) >= 10, timeout=120)
        driver = browser(tmp_path)

        shoot(driver, base + "/llmload/dashboard", SCREENSHOTS / "dashboard_running.png")
        wait_for(lambda: all(all(n >= 3 for n in c["points"]) for c in driver.execute_script(CHART_DATA)
                             if c["id"] != "chart-errors") and len(driver.execute_script(CHART_DATA)) == 11, timeout=30)
        check_dashboard(driver, "dashboard_running.png", running=True)
        values = hover_values(driver, "chart-ttft")
        assert re.fullmatch(r"\d+:\d\d", values[0]), values  # the time since the first sample
        assert all(SIGNIFICANT.fullmatch(v) for v in values[1:]), values
        assert "running" in driver.find_element(By.ID, "server-status").text

        driver.get(base + "/")
        rows = check_tab(driver, "llm_tab_running.png", "LLM", llm_tab.DEFAULT)
        chat = next(r for r in rows if r["Scenario"] == "chat")
        assert chat["Window"] == "last 10 s" and int(chat["In flight"]) <= 6
        assert {r["Scenario"] for r in rows} >= {"chat", "rag", "Aggregated"}
        for _key, title in llm_tab.DEFAULT[3:-1]:  # rates and latencies: at most 3 significant digits
            assert AT_MOST_3.fullmatch(chat[title]), (title, chat[title])
        details = check_tab(driver, "llm_tab_details_running.png", "LLM details", llm_tab.DETAILS)
        assert next(r for r in details if r["Scenario"] == "chat")["Server running / waiting"] != "–"

        # Stop from the page's own button, as a user does (Locust's header then says STOPPED too)
        wait_for(lambda: [b for b in driver.find_elements(By.CSS_SELECTOR, "button")
                          if b.text.strip().upper() == "STOP"])[0].click()
        rows = wait_for(lambda: (r := check_tab(driver, "llm_tab_stopped.png", "LLM", llm_tab.DEFAULT))
                        and r[0]["In flight"] == "stopped" and r, timeout=30)
        assert rows[0]["Window"].startswith("whole run (") and float(rows[0]["Rate (req/s)"]) > 0
        wait_for(lambda: "STOPPED" in driver.find_element(By.TAG_NAME, "header").text.upper())
        check_tab(driver, "llm_tab_stopped.png", "LLM", llm_tab.DEFAULT)  # the picture with Locust's header stopped

        driver.get(base + "/llmload/dashboard")
        wait_for(lambda: driver.find_element(By.ID, "state").text == "stopped", timeout=30)
        check_dashboard(driver, "dashboard_stopped.png", running=False)
        server = driver.find_element(By.ID, "server-status").text
        assert "running" not in server and "not read since the test stopped" in server, server
        assert "stopped" in driver.find_element(By.ID, "client").text
    finally:
        if driver is not None:
            driver.quit()
        end_process(locust)
