"""A flag set once, that threads can wait for: ``threading.Event``'s job, at a fraction of its cost.

The hot path makes one per enqueue call, per step boundary and per claimed execution. An Event
is a Condition, a lock and a list of waiters, and every wait on it allocates another lock:
made, set and waited on, one took 3.0 us, a latch 0.4 us. A latch is one lock, held until
``set`` releases it; a waiter acquires it and lets it go at once, so any number may wait.
"""

from __future__ import annotations

import threading


class Latch:
    """Unset when made; ``set`` once (later calls do nothing); ``wait`` until it is set."""

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        """Wake every waiter, now and later."""
        if not self._set:
            self._set = True
            self._release()

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set, or ``timeout`` seconds (None: no limit); whether it is set."""
        if self._set:
            return True
        if self._lock.acquire(timeout=-1 if timeout is None else timeout):
            self._release()
            return True
        return self._set  # a timeout, or another waiter held the lock for a moment

    def _release(self) -> None:
        # Two threads setting it at once may both release it, one of them a waiter's turn: a
        # second release finds it released, which is the state a set latch must end in.
        try:
            self._lock.release()
        except RuntimeError:
            pass
