"""SIGINT/SIGTERM acted on outside the signal handler (kestrel_core/engine/signals.py). A
worker's handler set Events itself, each taking a lock: when a second signal came while the
first one's handler held that lock (two SIGTERMs close together, Ctrl-C twice), the main thread
waited on itself for good; a bench worker was caught so, stopped by two SIGTERMs."""

from __future__ import annotations

import signal
import threading

import pytest

from kestrel_core.engine.signals import SignalRelay
from tests.waiting import wait_for


def test_each_signal_reaches_on_signal_in_order_in_the_relays_thread() -> None:
    assert threading.current_thread() is threading.main_thread()  # where signals are handled
    before = signal.getsignal(signal.SIGTERM)
    seen: list[tuple[int, str]] = []
    with SignalRelay(lambda signum: seen.append((signum, threading.current_thread().name))):
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        wait_for(lambda: len(seen) == 2, what="both signals relayed")
    assert seen == [(signal.SIGTERM, "kestrel-signals"), (signal.SIGINT, "kestrel-signals")]
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
    assert not any(t.name == "kestrel-signals" for t in threading.enumerate())


def test_a_signal_while_the_main_thread_holds_a_lock_on_signal_takes_does_not_hang() -> None:
    """As a handler paused inside ``Event.set`` held the Event's lock when the next signal came:
    handled in the handler, this signal would wait for that lock in the thread that holds it."""
    lock = threading.Lock()
    done = threading.Event()

    def on_signal(_signum: int) -> None:
        with lock:
            done.set()

    with SignalRelay(on_signal):
        with lock:
            signal.raise_signal(signal.SIGTERM)  # its handler runs here, in this thread
            assert not done.is_set()  # waiting, in the relay's thread, for the lock
        wait_for(done.is_set, what="on_signal, once the lock is free")


def test_in_handler_runs_in_the_main_thread_and_the_relay_still_gets_the_signal() -> None:
    """What must happen in the main thread (the demo leaves its TUI by KeyboardInterrupt)."""
    relayed = threading.Event()

    def leave(_signum: int) -> None:
        raise KeyboardInterrupt

    with SignalRelay(lambda _signum: relayed.set(), in_handler=leave):
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        wait_for(relayed.is_set, what="the relayed signal")
