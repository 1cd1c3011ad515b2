"""Every state an execution, a step attempt and a wait can be in, named once.

The values are the words the database stores (``workflow_executions.status``,
``step_attempts.outcome``, ``workflow_waits.kind``, ``workflow_waits.decision``) and the
timeline shows: each enum is a ``StrEnum``, so a member compares equal to its word and
formats as it (``ExecutionStatus.RUNNING == "running"``).
"""

from __future__ import annotations

from enum import StrEnum

# What the package re-exports (lifecycle/__init__.py); LIVE is the transitions' own.
__all__ = [
    "LIVE_STATUSES",
    "STATUSES",
    "TERMINAL_STATUSES",
    "AttemptOutcome",
    "ExecutionStatus",
    "WaitKind",
    "WaitState",
]


class ExecutionStatus(StrEnum):
    """An execution's status, in the order the console shows them: the live ones first, then
    how an execution ended."""

    ENQUEUED = "enqueued"  # waiting to be claimed (its ready row is in the queue)
    RUNNING = "running"  # claimed by a worker, under a lease
    WAITING = "waiting"  # parked on a sleep, a gate, children or an event
    PAUSED = "paused"  # held by an operator: nothing runs it until a resume (a cancel ends it)
    SUCCESS = "success"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def live(self) -> bool:
        """Not finished: an execution leaves a finished status only by an operator's requeue."""
        return self in LIVE


LIVE = frozenset({ExecutionStatus.ENQUEUED, ExecutionStatus.RUNNING, ExecutionStatus.WAITING, ExecutionStatus.PAUSED})

# In the order the console shows them: the live ones first, then how an execution ended.
STATUSES: tuple[str, ...] = tuple(s.value for s in ExecutionStatus)
# Not finished yet: waiting to run, running under a claim, parked on a wait, or held by an
# operator (paused: nothing runs it until it is resumed; a cancel ends it).
LIVE_STATUSES: tuple[str, ...] = tuple(s.value for s in ExecutionStatus if s.live)
# Finished: an execution never leaves these except by an operator's requeue.
TERMINAL_STATUSES: frozenset[str] = frozenset(s.value for s in ExecutionStatus if not s.live)


class AttemptOutcome(StrEnum):
    """How one attempt of a step ended (``step_attempts.outcome``). Its worker closes it
    (success, error); the transition that ends its claim closes it when the worker cannot
    (cancelled by an operator's cancel; abandoned by a lease sweep, a hand-back, a requeue, a
    resume or a deadline: its worker's later writes are fenced out)."""

    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"


class WaitKind(StrEnum):
    """What a wait (``workflow_waits.kind``) waits for."""

    SLEEP = "sleep"
    APPROVAL = "approval"
    CHILD = "child"
    EVENT = "event"


class WaitState(StrEnum):
    """A wait as the timeline shows it: open, or how it was resolved. ``approved``,
    ``rejected`` and ``timed_out`` are also the decisions stored on an approval gate
    (``workflow_waits.decision``)."""

    WAITING = "waiting"
    WOKE = "woke"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
