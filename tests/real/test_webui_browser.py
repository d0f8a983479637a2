"""The LLM tab and the live dashboard in a real browser (Debian's chromium, driven by Selenium).

Starts `llmload mock` and Locust with its web UI, starts a test from the page's form, and
checks the LLM tabs show numbers for the scenario and the server's own metrics (read from the
mock's /metrics), the dashboard draws its client and server charts with readable axes, and
after Stop the tab shows the run as stopped (tests/real/test_screenshots_live.py checks the layout).
Screenshots go to the test's temporary directory. Needs /usr/bin/chromium and
/usr/bin/chromedriver (`make test` installs them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request

import pytest

from llmload.metrics import catalog
from tests.support.browser import CHROMEDRIVER, CHROMIUM, wait_for
from tests.support.processes import ROOT, end_process, free_port

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)) and not os.environ.get("CI"),
    reason="needs chromium and chromedriver (apt-get install chromium chromium-driver; make test does it)",
)


def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)




def test_llm_tab_and_dashboard_in_chromium(mock_factory, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    mock = mock_factory("--profile", "fixed", "--ttft-ms", "60", "--itl-ms", "10")
    port = free_port()
    base = "/loadtest"
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url,
         "--web-host", "127.0.0.1", "--web-port", str(port), "--web-base-path", base, "--csv",
         str(tmp_path / "ui"), "--output-tokens", "20", "--input-tokens", "50"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    url = f"http://127.0.0.1:{port}{base}/"
    driver = None
    try:
        wait_for(lambda: urllib.request.urlopen(url, timeout=2).status == 200)
        driver = browser(tmp_path)
        driver.get(url)
        # start a test from the page's own form
        users = wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "input[name='userCount']"))
        for field in (users, driver.find_element(By.CSS_SELECTOR, "input[name='spawnRate']")):
            field.send_keys(Keys.CONTROL, "a")  # React inputs ignore clear()
            field.send_keys("4")
        driver.find_element(By.CSS_SELECTOR, "form button[type='submit']").click()
        def open_tab(title):
            wait_for(lambda: [t for t in driver.find_elements(By.CSS_SELECTOR, "[role='tab']")
                              if t.text.strip().upper() == title.upper()])[0].click()
            return wait_for(lambda: (h := [th.text for th in driver.find_elements(By.CSS_SELECTOR, "table thead th")])
                            and h[0] == "Scenario" and h)

        def llm_row(heads, ready):
            for tr in driver.find_elements(By.CSS_SELECTOR, "table tbody tr"):
                cells = dict(zip(heads, [td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")], strict=False))
                if cells.get("Scenario") == "chat" and ready(cells):
                    return cells
            return None

        ttft_p50 = catalog.BY_NAME["ttft"].title("p50", unit=True)
        heads = open_tab("LLM")
        cells = wait_for(lambda: llm_row(heads, lambda c: c[ttft_p50] not in ("–", "")), timeout=40)
        assert driver.find_element(By.CSS_SELECTOR, "header, body").text.count("RUNNING") >= 1
        users_shown = [e.text for e in driver.find_elements(By.XPATH, "//*[text()='Users']/following-sibling::*")]
        assert "4" in users_shown, users_shown
        driver.save_screenshot(str(tmp_path / "llm_tab.png"))
        assert cells["Window"] == "last 10 s"
        assert 60.0 <= float(cells[ttft_p50]) < 200.0  # the mock sends the first token after 60 ms
        assert float(cells["Output (tok/s)"]) > 0
        # the server's own columns (LLM details): running / waiting, KV %, hit rate, TTFT mean server / client
        heads = open_tab("LLM details")
        cells = wait_for(lambda: llm_row(heads, lambda c: not c["TTFT mean server / client (ms)"].startswith("–")),
                         timeout=40)
        running, waiting = (int(x) for x in cells["Server running / waiting"].split(" / "))
        assert 0 <= running <= 4 and waiting == 0
        server_ttft, client_ttft = (float(x) for x in cells["TTFT mean server / client (ms)"].split(" / "))
        assert 60.0 <= server_ttft <= client_ttft < 200.0

        driver.get(f"http://127.0.0.1:{port}{base}/llmload/dashboard")
        charts = "return [...window.llmload.charts].map(([id, c]) => [id, c.u.series.slice(1).map(s => s.label), " \
                 "c.u.data.slice(1).map(ys => ys.filter(v => v !== null).length)])"
        # lines, not single points: at least two samples in every series of every chart (no errors here, and the
        # fixed engine has no prefix cache: its KV series only)
        SPARSE = ("chart-errors", "chart-server-cache")
        PLAIN = [c for c in catalog.dashboard_spec() if not c["differs_from"]]
        drawn = wait_for(lambda: (cs := {i: (names, n) for i, names, n in driver.execute_script(charts)})
                         and len(cs) == len(PLAIN) + 6
                         and all(min(n) >= 2 for i, (_, n) in cs.items() if i not in SPARSE)
                         and cs["chart-server-cache"][1][0] >= 2 and cs, timeout=40)
        # a latency chart per catalog metric (from metrics.json, with its series names), then tok/s, load, errors
        for chart in PLAIN:
            assert drawn[f"chart-{chart['name']}"][0] == [s["name"] for s in chart["series"]]
        # plain chat: TTFT visible is TTFT exactly, so it has no panel (issue 32, item 16)
        assert "chart-ttft_visible" not in drawn and not driver.find_element(By.ID, "chart-ttft_visible").is_displayed()
        # the client's line is the summary's verdict so far, then the newest interval's state (issue 32, item 11)
        # (either verdict: on a busy machine the client may be limited, and the page must say so as the summary does)
        client = driver.find_element(By.ID, "client").text
        assert re.fullmatch(r"(client: not limited|CLIENT-LIMITED: ).* — now: (ok|limited) \(CPU .*", client), client
        # the server's series: running and waiting, KV % and hit rate, TTFT server vs client
        assert drawn["chart-server-queue"][0] == ["running", "waiting"]
        assert drawn["chart-server-ttft"][0] == ["server mean", "client mean", "server p95", "client p95"]
        assert "vllm: " in driver.find_element(By.ID, "server-status").text
        # an error chart with no errors reads 0 … 4, not "0.0" on every tick
        ticks = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#chart-errors .tick.y")]
        assert ticks == ["0", "1", "2", "3", "4"], ticks
        driver.save_screenshot(str(tmp_path / "dashboard.png"))
        assert (tmp_path / "dashboard.png").stat().st_size > 10_000

        # Stop: the tab shows the whole run, stopped, not the last live numbers with 0 in flight
        driver.get(url)
        stop = wait_for(lambda: [b for b in driver.find_elements(By.CSS_SELECTOR, "button")
                                 if b.text.strip().upper() == "STOP"])
        stop[0].click()
        heads = open_tab("LLM")
        cells = wait_for(lambda: llm_row(heads, lambda c: c["In flight"] == "stopped"), timeout=30)
        assert cells["Window"].startswith("whole run (") and cells["Window"].endswith("stopped")
        assert float(cells["Rate (req/s)"]) > 0
        driver.save_screenshot(str(tmp_path / "llm_tab_stopped.png"))
    finally:
        if driver is not None:
            driver.quit()
        end_process(locust)


HOSTILE = "</option></select><img src=x onerror=window.__pwned=1>"


def test_a_hostile_scenario_name_and_a_host_change_in_chromium(mock_factory, tmp_path):
    """No script runs from a scenario name in the LLM tab or the dashboard, and a host typed into the
    form receives no key (issue 19: rows 1 and 6)."""
    import json

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from tests.support import wire_server

    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    log = tmp_path / "evil.jsonl"
    evil, evil_url = wire_server.start_process(str(log))
    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(f'workloads:\n  "{HOSTILE}":\n    input_tokens: 10\n    output_tokens: 5\n')
    port = free_port()
    key = "sk-browser-key-4242"
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url,
         "--web-host", "127.0.0.1", "--web-port", str(port), "--scenario", str(scenario), "--no-server-metrics"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_API_KEY": key}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    driver = None
    try:
        wait_for(lambda: urllib.request.urlopen(url, timeout=2).status == 200)
        driver = browser(tmp_path)
        driver.get(url)
        users = wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "input[name='userCount']"))
        for name, value in (("userCount", "2"), ("spawnRate", "2"), ("host", evil_url)):
            field = users if name == "userCount" else driver.find_element(By.CSS_SELECTOR, f"input[name='{name}']")
            field.send_keys(Keys.CONTROL, "a")
            field.send_keys(value)
        driver.find_element(By.CSS_SELECTOR, "form button[type='submit']").click()
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 2, timeout=30)
        tab = wait_for(lambda: [t for t in driver.find_elements(By.CSS_SELECTOR, "[role='tab']")
                                if t.text.strip().upper() == "LLM"])
        tab[0].click()
        wait_for(lambda: HOSTILE in driver.find_element(By.TAG_NAME, "body").text, timeout=30)  # shown as text
        assert driver.execute_script("return window.__pwned") is None
        driver.get(url + "llmload/dashboard")
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "select option"), timeout=30)
        assert HOSTILE in [o.text for o in driver.find_elements(By.CSS_SELECTOR, "select option")]
        assert driver.execute_script("return window.__pwned") is None
        assert not driver.find_elements(By.CSS_SELECTOR, "img[src='x']")
    finally:
        if driver is not None:
            driver.quit()
        locust.terminate()
        _, err = locust.communicate(timeout=30)
        evil.kill()
    entries = [json.loads(line) for line in log.read_text().splitlines(keepends=True) if line.endswith("\n")]
    assert entries and all(key not in json.dumps(e["headers"]) for e in entries), entries
    assert "the host changed from" in err, err[-2000:]
