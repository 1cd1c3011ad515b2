"""Fleet-wide duties shared out among the live workers, without a leader.

Every worker sweeps lapsed leases, wakes due waits, ends executions past their deadline, ticks
the schedules and does the minute's upkeep (partitions ahead, counters folded): duties whose
work is the whole schema's, not the worker's. Each worker doing each of them on its own timer
made their cost grow with the fleet: 500 idle workers through PgBouncer ran ~1,800 such
statements a second for work a handful of them could do (bench/fleet.py, docs/scale.md). So a
worker of a fleet of N takes its turn at a fleet-wide duty with probability SHARE / N (always,
in a fleet of SHARE or fewer): the fleet as a whole runs each about SHARE times per interval,
whatever N, and no worker is special (none to elect, none to lose). Nobody takes a turn in an
interval with probability about e**-SHARE (3 in 10,000); the next interval comes again. A
draining worker still counts, and still takes its turns (maintenance.py).

The poll for work (a claim when nothing woke the worker and its last claim found nothing) is
shared the same way, among the workers that poll for the same work: those claiming the same
workflows, versions and queues that had a free slot at their last beat (a worker whose slots
are all taken does not poll: counted, it would make the others poll too rarely, and work due
without a NOTIFY, a delay or any enqueue through PgBouncer, wait). A claim woken by a NOTIFY,
a finished execution or a backlog is never skipped. A worker writes its free slots at each
heartbeat (none while it drains: it no longer polls) and, in a fleet whose polls are shared,
at once when a claim takes its last one (else, busy, it would count as a poller for up to a
third of the lease).

The size is read at every heartbeat (a third of the lease): a worker that dies stops counting
after half a lease; until then the survivors take their turns a little less often than they
could.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from kestrel_core.db.connection import ConnectionRunner
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render
from kestrel_core.dispatch.buckets import Claims

SQL = statements_beside(__file__)

log = logging.getLogger("kestrel.fleet")

# How many workers of a fleet, on average, take each turn at a fleet-wide duty.
SHARE = 8


@dataclass
class Fleet:
    """The fleet as this worker last read it: ``size`` live workers of the schema, ``pollers``
    of them polling for what it claims (itself counted in both)."""

    size: int = 1
    pollers: int = 1
    full_said: bool = False  # this worker's row says it has no free slot (its last write)

    def read(self, conn: psycopg.Connection, schema: str, *, worker_id: str, lease: timedelta, claims: Claims) -> None:
        """Count the live workers now."""
        params = {"worker_id": worker_id, "lease": lease, **claims.params()}
        row = conn.execute(render(SQL.fleet_size, schema), params).fetchone()
        if row is not None:
            self.size, self.pollers = int(row[0]), int(row[1])

    def turn(self, *, poll: bool = False) -> bool:
        """Whether this worker takes this turn at a fleet-wide duty (``poll``: at the poll for
        work, shared among the pollers): always among SHARE or fewer."""
        n = self.pollers if poll else self.size
        return n <= SHARE or random.random() < SHARE / n

    @property
    def must_say_full(self) -> bool:
        """Whether a claim that took this worker's last slot must say so: where it matters (a
        fleet whose polls are shared, more than SHARE pollers) and its row does not yet."""
        return self.pollers > SHARE and not self.full_said

    def say_full(self, run: ConnectionRunner, schema: str, *, worker_id: str) -> None:
        """Record that this worker has no free slot now (say_full in fleet.sql), on the session
        ``run`` gives; a failure is left to the next heartbeat, which says it anyway."""
        try:
            run(lambda conn: conn.execute(render(SQL.say_full, schema), {"worker_id": worker_id}))
        except psycopg.Error as exc:
            log.debug(
                "event=say_full_failed worker=%s error=%s sqlstate=%s", worker_id, type(exc).__name__, exc.sqlstate
            )
            return
        self.full_said = True
