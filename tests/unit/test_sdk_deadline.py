"""The SDK transport's deadline lands only inside the read it guards (llmload/transport/sdk.py):
thrown from the hub's next turn, it once reached a test's teardown after the stream had ended."""

from __future__ import annotations

import gevent
import gevent.event

from llmload.transport.sdk import _Deadline, _interrupt


def _waiter(done: gevent.event.Event, seen: list) -> None:
    try:
        done.wait(5)
        seen.append("woke")
    except _Deadline as e:
        seen.append(f"deadline: {e}")


def _run(reading: bool) -> list:
    done, seen = gevent.event.Event(), []
    user = gevent.spawn(_waiter, done, seen)
    gevent.sleep(0)  # the user waits
    gevent.get_hub().loop.run_callback(_interrupt, user, [reading], _Deadline("no first token within 0.4 s"))
    gevent.sleep(0.01)
    done.set()
    user.join(5)
    return seen


def test_a_deadline_interrupts_a_read_still_going():
    assert _run(reading=True) == ["deadline: no first token within 0.4 s"]


def test_a_deadline_whose_read_ended_reaches_nothing():
    assert _run(reading=False) == ["woke"]


def test_a_dead_user_is_left_alone():
    user = gevent.spawn(lambda: None)
    user.join()
    _interrupt(user, [True], _Deadline("x"))  # no error
