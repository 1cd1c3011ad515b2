"""A worker's lifecycle: one state, moved forward in one place, waited on with one Condition.

    NEW -> STARTING -> RUNNING -> DRAINING -> HURRYING -> PAST_GRACE -> QUIET -> STOPPED
      \\________________\\_____________^  (a stop while new or starting: straight to DRAINING)

The states are ordered and a worker only moves forward (possibly skipping states: a second
signal moves a worker still starting to HURRYING). What each state means to the worker's
threads, and so what they ask ("at least DRAINING?"):

- STARTING: registering, possibly waiting for an unreachable database;
- RUNNING: claiming and running;
- DRAINING: no more claims; executions stop at their next boundary; a stop waits for the
  running steps (up to the grace);
- HURRYING: the stop no longer waits for running steps (a second SIGINT/SIGTERM);
- PAST_GRACE: writes still retrying while the database is away give up;
- QUIET: the heartbeat and the sweeps end (no heartbeat may follow the retirement);
- STOPPED: every thread exits.
"""

from __future__ import annotations

import enum
import threading


class WorkerState(enum.IntEnum):
    """Where a worker is in its life; see the module."""

    NEW = 0
    STARTING = 1
    RUNNING = 2
    DRAINING = 3
    HURRYING = 4
    PAST_GRACE = 5
    QUIET = 6
    STOPPED = 7


# The moves allowed from each state (besides staying): forward only, and RUNNING only from
# STARTING (a worker that began draining while it started never runs).
MOVES: dict[WorkerState, frozenset[WorkerState]] = {
    WorkerState.NEW: frozenset({WorkerState.STARTING, *(s for s in WorkerState if s >= WorkerState.DRAINING)}),
    WorkerState.STARTING: frozenset(s for s in WorkerState if s > WorkerState.STARTING),
    **{state: frozenset(s for s in WorkerState if s > state) for state in WorkerState if state >= WorkerState.RUNNING},
}


class IllegalMove(RuntimeError):
    """A move the lifecycle does not allow (an engine bug)."""


class Lifecycle:
    """The state of one worker, shared by its threads."""

    def __init__(self) -> None:
        self._state = WorkerState.NEW
        self._changed = threading.Condition()

    @property
    def state(self) -> WorkerState:
        return self._state  # one attribute read: no lock needed

    def move(self, to: WorkerState) -> bool:
        """Move to ``to``; True if the state changed. Moving to a state already reached (or
        passed) changes nothing, so that two stops, or a signal during a stop, are harmless; a
        move the table forbids from further back is ``IllegalMove``."""
        with self._changed:
            now = self._state
            if to <= now:
                return False
            if to not in MOVES[now]:
                raise IllegalMove(f"a worker cannot go from {now.name} to {to.name}")
            self._state = to
            self._changed.notify_all()
            return True

    def advance(self, to: WorkerState, *, only_from: WorkerState) -> bool:
        """Move to ``to`` only if the worker is at ``only_from`` (e.g. RUNNING only if still
        STARTING: a worker told to stop while it started stays stopping)."""
        with self._changed:
            if self._state is not only_from:
                return False
            return self.move(to)

    def reached(self, state: WorkerState) -> bool:
        """Whether the worker is at ``state`` or past it."""
        return self._state >= state

    def wait(self, state: WorkerState, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the worker to reach ``state``; whether it has."""
        if self._state >= state:
            return True
        with self._changed:
            return self._changed.wait_for(lambda: self._state >= state, timeout)

    def flag(self, state: WorkerState) -> Reached:
        """``state`` seen as an event (``is_set``, ``wait``, ``set``): what the workflow contexts
        and the maintenance duties wait on."""
        return Reached(self, state)


class Reached:
    """ "The worker has reached ``state``", with ``threading.Event``'s reading methods; ``set()``
    moves the worker there."""

    __slots__ = ("_lifecycle", "_state")

    def __init__(self, lifecycle: Lifecycle, state: WorkerState) -> None:
        self._lifecycle = lifecycle
        self._state = state

    def is_set(self) -> bool:
        return self._lifecycle.reached(self._state)

    def wait(self, timeout: float | None = None) -> bool:
        return self._lifecycle.wait(self._state, timeout)

    def set(self) -> None:
        self._lifecycle.move(self._state)
