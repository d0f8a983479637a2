"""Ctrl+C reaches Locust's main greenlet as a hub callback, and cuts no other greenlet short: a
KeyboardInterrupt raised inside the master's ZeroMQ listener once killed it, and both workers'
final rows were lost (tests/e2e/test_endings.py, sigint)."""

from __future__ import annotations

import os
import signal
import time

import gevent
import pytest

from llmload.plugin.run import interrupt


def test_sigint_interrupts_the_main_greenlet_and_not_the_one_that_runs():
    done: list[bool] = []

    def listener() -> None:  # a greenlet busy when the signal comes, as the master's listener is
        os.kill(os.getpid(), signal.SIGINT)
        t_end = time.monotonic() + 0.05
        while time.monotonic() < t_end:  # Python's own handler raises here, at the next bytecode
            pass
        done.append(True)

    interrupt.deliver_sigint_to_main()
    try:
        assert interrupt.deliver_sigint_to_main() is interrupt._installed  # once per process
        worker = gevent.spawn(listener)
        with pytest.raises(KeyboardInterrupt):
            worker.join()
            gevent.sleep(1.0)  # the hub runs the signal's callback once the listener yields
        assert done == [True] and worker.successful()
    finally:
        interrupt.forget()
