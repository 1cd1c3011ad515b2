"""Queues: declarations in code, upserted by workers; pause and resume by operators.

A queue's limits live in code (``app.queue(...)``) and reach the database when a worker
starts (the last worker to start wins if two deployments disagree). ``paused`` belongs to
operators: declaring never touches it. The claim (claim.py) enforces the limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core.base.errors import InvalidArgument
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render

SQL = statements_beside(__file__)

DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class Queue:
    """A queue as declared in code. ``None`` = no such limit.

    ``per_key`` is how many executions with the same ``concurrency_key`` may run at once in
    this queue (default 1: one per customer, say); it applies only to keyed executions.
    ``priority`` is the default priority of executions enqueued on it (higher runs first).
    """

    name: str
    concurrency: int | None = None
    per_worker: int | None = None
    rate: tuple[int, timedelta] | None = None
    priority: int = 0
    per_key: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidArgument("a queue needs a non-empty name")
        for label, value in (
            ("concurrency", self.concurrency),
            ("per_worker", self.per_worker),
            ("per_key", self.per_key),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InvalidArgument(f"queue {self.name!r}: {label} must be a positive integer or None")
        if self.rate is not None:
            count, period = self.rate
            if not isinstance(count, int) or count < 1 or not isinstance(period, timedelta) or period <= timedelta(0):
                raise InvalidArgument(
                    f"queue {self.name!r}: rate must be (N, timedelta), N >= 1, period > 0, "
                    "e.g. rate=(100, timedelta(minutes=1))"
                )

    @property
    def limited(self) -> bool:
        return any(v is not None for v in (self.concurrency, self.per_worker, self.rate))


def bindings(workflows: Iterable[Any]) -> dict[str, list[str]]:
    """Which registered workflows run in which queue: {queue: [workflow name, ...]}."""
    out: dict[str, list[str]] = {}
    for wf in workflows:
        out.setdefault(wf.queue, []).append(wf.name)
    return out


def declare(conn: psycopg.Connection, schema: str, declared: Sequence[Queue], bindings: dict[str, list[str]]) -> None:
    """Upsert the declared queues and the queues workflows are bound to, in one transaction."""
    by_name = {q.name: q for q in declared}
    with conn.transaction():
        for name in sorted(set(by_name) | set(bindings)):  # by name: the claim's lock order
            workflows = sorted(bindings.get(name, []))
            q = by_name.get(name)
            if q is None:
                conn.execute(render(SQL.bind, schema), {"name": name, "workflows": workflows})
                continue
            conn.execute(
                render(SQL.declare, schema),
                {
                    "name": q.name,
                    "concurrency": q.concurrency,
                    "per_worker": q.per_worker,
                    "rate_limit": q.rate[0] if q.rate else None,
                    "rate_period": q.rate[1] if q.rate else None,
                    "per_key": q.per_key,
                    "priority": q.priority,
                    "workflows": workflows,
                },
            )


def undeclared(conn: psycopg.Connection, schema: str, names: Sequence[str]) -> list[str]:
    """The queues among ``names`` that have no row: a worker serving only those (a typo in
    ``--queues``) would claim nothing but executions enqueued there with ``queue=``."""
    return [row[0] for row in conn.execute(render(SQL.undeclared, schema), {"names": list(names)})]
