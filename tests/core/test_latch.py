"""The latch the hot path waits on instead of threading.Event (kestrel_core/base/latch.py)."""

from __future__ import annotations

import threading
import time

from kestrel_core.base.latch import Latch


def test_a_latch_set_twice_wakes_its_waiter_and_does_not_raise() -> None:
    """A batch writer's own call is in the batch it writes: its latch is set when it is handed
    the batch and again with its outcome."""
    latch = Latch()
    woken = threading.Event()
    waiter = threading.Thread(target=lambda: (latch.wait(), woken.set()))
    waiter.start()
    latch.set()
    latch.set()
    waiter.join(5)
    assert woken.is_set() and not waiter.is_alive() and latch.is_set()


def test_every_waiter_wakes_and_a_later_wait_returns_at_once() -> None:
    latch = Latch()
    woken: list[bool] = []
    waiters = [threading.Thread(target=lambda: woken.append(latch.wait(10))) for _ in range(8)]
    for t in waiters:
        t.start()
    latch.set()
    for t in waiters:
        t.join(5)
    assert woken == [True] * 8
    started = time.monotonic()
    assert latch.wait() and latch.wait(0) and time.monotonic() - started < 1


def test_a_wait_that_times_out_says_so_and_leaves_the_latch_unset() -> None:
    latch = Latch()
    assert not latch.wait(0.01) and not latch.is_set()
    assert not latch.wait(0)
    latch.set()
    assert latch.wait(0) and latch.is_set()


def test_concurrent_sets_and_waits_neither_raise_nor_hang() -> None:
    """Two threads setting it at once while two wait: a set may release the lock during a
    waiter's turn; no one raises, every waiter wakes, and it stays set."""
    for _ in range(200):
        latch = Latch()
        errors: list[BaseException] = []
        woken: list[bool] = []
        go = threading.Barrier(4)

        def setter() -> None:
            go.wait()
            try:
                latch.set()
            except BaseException as exc:
                errors.append(exc)

        def waiter() -> None:
            go.wait()
            try:
                woken.append(latch.wait(10))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=f) for f in (setter, setter, waiter, waiter)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        assert not errors and woken == [True, True] and latch.wait(0)
