"""Before a run: does the server answer at all? One probe, one clear message.

Any HTTP answer to ``GET /v1/models`` counts (a 401 or a 404 is a server that is there); a
refused connection, an unknown host or silence does not. ``--preflight end`` (default) ends the
run with that message, ``wait`` probes once a second until the server answers (bounded by
``--preflight-wait-s``), ``off`` skips the check.

Usage::

    problem = preflight("http://127.0.0.1:8000", ClientOptions(), mode="end", wait_s=300)
    if problem:
        sys.exit("llmload: " + problem)
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from llmload.transport.connection import ClientOptions
from llmload.transport.target import models_request, models_url

log = logging.getLogger("llmload")

PROBE_TIMEOUT_S = 5.0
RETRY_S = 1.0


def probe(base_url: str, options: ClientOptions, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the server answered (with any status); else why it did not."""
    opener, req = models_request(base_url, options)
    try:
        with opener.open(req, timeout=timeout) as resp:
            resp.read(1 << 16)
        return None
    except urllib.error.HTTPError:
        return None  # it answered
    except urllib.error.URLError as e:
        reason = e.reason
        return str(getattr(reason, "strerror", None) or reason)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except (OSError, ValueError) as e:
        return str(e)


def preflight(base_url: str, options: ClientOptions, mode: str, wait_s: float,
              sleep: Callable[[float], None] = time.sleep) -> str | None:
    """None when the run may start; else the one message that ends it."""
    if mode == "off":
        return None
    reason = probe(base_url, options)
    if reason is None:
        return None
    url = models_url(base_url, options)
    if mode == "wait":
        log.warning("llmload: %s does not answer (%s); waiting up to %g s for it (--preflight-wait-s)", url,
                    reason, wait_s)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))
            reason = probe(base_url, options)
            if reason is None:
                log.info("llmload: %s answers; starting", url)
                return None
        return (f"the server at {base_url} still does not answer after {wait_s:g} s (GET {url}: {reason}); "
                "is it up, and is --host right?")
    return (f"cannot reach the server at {base_url} (GET {url}: {reason}); is it up, and is --host right? "
            "(--preflight wait waits for it, --preflight off skips this check)")
