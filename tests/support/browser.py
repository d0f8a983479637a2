"""Chromium and its driver for the web UI tests."""

from __future__ import annotations

import shutil
import time

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def wait_for(cond, timeout=30.0, step=0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # the page is still loading
            last = e
        time.sleep(step)
    raise AssertionError(f"timed out; last: {last!r}")
