"""`Repeating`, the one background loop of the claim heartbeat, the row progress and the watch
on the Ray head: it calls its step every interval (or the interval the step returns) and stops
when told, a call in progress finished first."""

from __future__ import annotations

import threading
import time

from sentray.kit.repeating import Repeating


def test_it_calls_the_step_until_stopped():
    calls = []
    loop = Repeating("test", lambda: calls.append(time.monotonic()), every=0.01).start()
    deadline = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    loop.stop()
    seen = len(calls)
    time.sleep(0.05)
    assert seen >= 3 and len(calls) == seen  # nothing after stop()


def test_a_step_chooses_the_next_wait_and_stop_waits_for_it():
    started, release, waits = threading.Event(), threading.Event(), []

    def step():
        waits.append(time.monotonic())
        if len(waits) == 2:
            started.set()
            release.wait(5)
        return 0.001

    loop = Repeating("test", step, every=0.01).start()
    assert started.wait(5)
    stopper = threading.Thread(target=loop.stop)
    stopper.start()
    stopper.join(0.05)
    assert stopper.is_alive()  # the call in progress holds stop() back
    release.set()
    stopper.join(5)
    assert not stopper.is_alive()


def test_stop_before_start_is_harmless():
    Repeating("test", lambda: None, every=1).stop()
