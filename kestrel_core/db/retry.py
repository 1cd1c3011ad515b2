"""One retry policy at the connection seam: which database errors are tried again, how often,
after what pause, and which refused batches are written again row by row.

Every loop that retries a statement asks the policy (``RETRY``) rather than spelling its own
error set: a worker's writes (engine/worker.py ``Worker.db``), an operator action
(admin/actions.py), an enqueue past the history's ranges (api/), and the two group commits that
split a refused batch (durable/group_commit.py, dispatch/enqueue_batch.py).

What an error means (``classify``):
- ``OUTAGE``: the database could not be reached (outage.py): waited out, with backoff, for as
  long as the caller's window allows; the same statement succeeds once it is back;
- ``CONFLICT``: rolled back to end a deadlock or a serialization failure (SQLSTATE class 40):
  over the moment it is reported, so tried again at once, a few times;
- ``RANGES_BEHIND``: an insert whose id no partition of workflow_executions holds yet: the
  caller creates the ranges (``repair``), then tries again, a few times;
- ``REFUSED``: anything else the server answers (a bad value, a statement timeout): the same
  statement would get the same answer, so it is raised at once.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

import psycopg

from kestrel_core.base.backoff import Backoff
from kestrel_core.base.errors import DatabaseUnavailable, SchemaOutdated
from kestrel_core.db.outage import is_conflict, is_outage


class Verdict(enum.Enum):
    """What a database error means for trying the statement again; see the module."""

    OUTAGE = "outage"
    CONFLICT = "conflict"
    RANGES_BEHIND = "ranges_behind"
    REFUSED = "refused"


ALL = frozenset({Verdict.OUTAGE, Verdict.CONFLICT, Verdict.RANGES_BEHIND})


def past_the_ranges(exc: BaseException) -> bool:
    """Whether an insert failed because its id has no range yet: no partition of
    workflow_executions holds it (a CHECK violation naming the table and no constraint). The
    workers' upkeep keeps ranges ahead once a minute; a burst of enqueues, or none running, can
    pass them. Nothing was written: the insert can go again once the range exists."""
    return (
        isinstance(exc, psycopg.errors.CheckViolation)
        and exc.diag.table_name == "workflow_executions"
        and exc.diag.constraint_name is None
    )


OUTAGE_BACKOFF = Backoff(0.05, cap=2.0)
CONFLICT_BACKOFF = Backoff(0.01, cap=0.2)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times, and after what pause, each kind of error is tried again."""

    outage_backoff: Backoff = OUTAGE_BACKOFF  # for as long as the caller's window allows
    conflict_tries: int = 3  # tries in all (the first included)
    conflict_backoff: Backoff = CONFLICT_BACKOFF
    ranges_tries: int = 5  # tries in all; another caller may be creating them at that moment
    ranges_pause: float = 0.05  # times the number of repairs so far

    def classify(self, exc: BaseException, conn: psycopg.Connection | psycopg.AsyncConnection | None = None) -> Verdict:
        """What ``exc`` (raised on ``conn``, if known) means; see the module."""
        if is_conflict(exc):
            return Verdict.CONFLICT
        if past_the_ranges(exc):
            return Verdict.RANGES_BEHIND
        if is_outage(exc, conn):
            return Verdict.OUTAGE
        return Verdict.REFUSED

    def splits(self, exc: BaseException) -> bool:
        """Whether a batch the database refused with ``exc`` is written again row by row (so
        that one bad row fails only its own caller): not when the error says nothing about the
        rows (the database is away, or the schema is not the code's)."""
        return not (is_outage(exc) or isinstance(exc, (DatabaseUnavailable, SchemaOutdated)))

    def attempts(self, *, retry: frozenset[Verdict] = ALL, window: float = 0.0) -> Attempts:
        """The bookkeeping of one call: the errors it tries again (``retry``), and for how long
        an outage is waited out (``window`` seconds from now)."""
        return Attempts(self, retry, time.monotonic() + window)


@dataclass
class Retry:
    """Try again after ``delay`` seconds (first ``repair`` the ranges if ``verdict`` says so)."""

    verdict: Verdict
    delay: float


@dataclass
class Attempts:
    """One call's tries so far, by kind of error."""

    policy: RetryPolicy
    retry: frozenset[Verdict]
    deadline: float  # time.monotonic() past which an outage is no longer waited out
    counts: dict[Verdict, int] = field(default_factory=dict)

    def after(
        self, exc: BaseException, conn: psycopg.Connection | psycopg.AsyncConnection | None = None
    ) -> Retry | None:
        """How to go on after ``exc``: a ``Retry``, or None when it must be raised."""
        verdict = self.policy.classify(exc, conn)
        if verdict not in self.retry:
            return None
        done = self.counts.get(verdict, 0)
        p = self.policy
        if verdict is Verdict.CONFLICT:
            if done >= p.conflict_tries - 1:
                return None
            delay = p.conflict_backoff.delay(done)
        elif verdict is Verdict.RANGES_BEHIND:
            if done >= p.ranges_tries - 1:
                return None
            delay = p.ranges_pause * (done + 1)
        elif verdict is Verdict.OUTAGE:
            delay = p.outage_backoff.delay(done)
            if time.monotonic() + delay > self.deadline:
                return None
        else:
            return None
        self.counts[verdict] = done + 1
        return Retry(verdict, delay)


RETRY = RetryPolicy()
