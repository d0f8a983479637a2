"""SIGINT as a callback of gevent's hub, thrown into the main greenlet, never raised inside
whichever greenlet happened to run.

Python raises KeyboardInterrupt in the frame that runs when SIGINT arrives, and in a Locust process
that can be any greenlet. Once it was the master's ZeroMQ listener (Locust's ``client_listener``,
in llmload's channel guard). gevent re-raised it in the main greenlet, and Locust shut down as it
should, but its listener was dead: both workers' final rows never arrived, both were named LOST
WORKER, and a clean run exited 1 (tests/e2e/test_endings.py, sigint, on a busy machine). Here the
signal is a hub callback that throws KeyboardInterrupt into the main greenlet, where Locust waits
for it (``main_greenlet.join()``), and no other greenlet is cut short.

Usage::

    deliver_sigint_to_main()     # at init, in every Locust process llmload runs in (once)
    forget()                     # (tests) Python's own handling again
"""

from __future__ import annotations

import signal
from typing import Any

import gevent

_installed: Any = None  # once per process: a second init (tests build Environments by hand) adds none


def deliver_sigint_to_main() -> Any:
    """Install the handler; returns gevent's watcher (``.cancel()`` removes it)."""
    global _installed
    if _installed is not None:
        return _installed
    main = gevent.get_hub().parent  # the greenlet that started the hub: Locust's main

    def interrupt_main() -> None:
        main.throw(KeyboardInterrupt)

    _installed = gevent.signal_handler(signal.SIGINT, interrupt_main)
    return _installed


def forget() -> None:
    """Cancel the handler (tests): Python's own handling of SIGINT again."""
    global _installed
    if _installed is not None:
        _installed.cancel()
        _installed = None
