"""Deterministic test data, inserted straight into the tables with SQL.

Tests that read history (reports, ``status``, ``list``, ``show``, the TUI) need executions in
every state with known timestamps, without running a worker. ``seed_history`` writes one small,
fixed story and returns a ``SeedFacts`` describing every row it wrote, so tests compute their
expectations from the facts instead of hard-coding ids or times. ``seed_bulk_finished`` writes
many finished executions in one statement for scale tests.

All timestamps are ``facts.now`` (the database's ``now()`` when seeding started) plus or minus a
fixed offset. The connection given is the ``db`` fixture: autocommit, search_path = kestrel.

Keep these names stable: other test modules import them (add, don't rename).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core import Execution, Kestrel
from tests.waiting import wait_for

# ---------------------------------------------------------------------------------------------
# What seed_history wrote
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeededExecution(Execution):
    """The row as ``app.get`` reads it, with the seed's label for it and its priority."""

    label: str
    priority: int


@dataclass(frozen=True)
class SeededAttempt:
    """One step_attempts row."""

    execution_id: int
    label: str
    workflow_name: str
    step_id: str
    attempt: int
    owner_id: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: str  # running | success | error
    error: str | None

    @property
    def seconds(self) -> float | None:
        """Duration of a finished attempt."""
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class SeededOutput:
    """One operation_outputs row (finished step, decided approval or woken sleep)."""

    execution_id: int
    label: str
    step_id: str
    output: Any
    error: str | None
    started_at: datetime
    created_at: datetime
    attempts: int
    owner_id: str | None


@dataclass(frozen=True)
class SeededWait:
    """One workflow_waits row."""

    execution_id: int
    label: str
    workflow_name: str
    step_id: str
    kind: str  # sleep | approval
    created_at: datetime
    wake_at: datetime | None
    resolved_at: datetime | None
    decision: str | None  # approved | rejected | timed_out | None
    decided_by: str | None
    comment: str | None
    decided_at: datetime | None
    details: Any


@dataclass(frozen=True)
class SeededWorker:
    worker_id: str
    hostname: str
    pid: int
    workflows: list[str]
    concurrency: int
    started_at: datetime
    last_heartbeat: datetime
    stopped_at: datetime | None


@dataclass(frozen=True)
class SeededAction:
    """One operator_actions row."""

    at: datetime
    actor: str
    action: str
    execution_id: int
    label: str
    step_id: str | None
    comment: str | None
    from_status: str | None


@dataclass
class SeedFacts:
    """Everything seed_history inserted, for tests to compute their expectations from."""

    now: datetime
    executions: dict[str, SeededExecution] = field(default_factory=dict)
    attempts: list[SeededAttempt] = field(default_factory=list)
    outputs: list[SeededOutput] = field(default_factory=list)
    waits: list[SeededWait] = field(default_factory=list)
    workers: list[SeededWorker] = field(default_factory=list)
    actions: list[SeededAction] = field(default_factory=list)

    def id(self, label: str) -> int:
        """The execution id of a labelled execution (see HISTORY for the labels)."""
        return self.executions[label].id

    def execution(self, execution_id: int) -> SeededExecution:
        return next(e for e in self.executions.values() if e.id == execution_id)

    def with_status(self, *statuses: str) -> list[SeededExecution]:
        """Executions in any of these statuses, ordered by id."""
        return sorted((e for e in self.executions.values() if e.status in statuses), key=lambda e: e.id)

    def attempts_of(self, label: str, step_id: str | None = None) -> list[SeededAttempt]:
        return [a for a in self.attempts if a.label == label and (step_id is None or a.step_id == step_id)]

    def waits_of(self, label: str) -> list[SeededWait]:
        return [w for w in self.waits if w.label == label]

    def wait(self, label: str, step_id: str) -> SeededWait:
        return next(w for w in self.waits if w.label == label and w.step_id == step_id)

    def pending_approvals(self) -> list[SeededWait]:
        """Approval gates still blocking, oldest first."""
        pending = [w for w in self.waits if w.kind == "approval" and w.resolved_at is None]
        return sorted(pending, key=lambda w: w.created_at)

    @property
    def labels(self) -> list[str]:
        return list(self.executions)


# ---------------------------------------------------------------------------------------------
# The story seed_history writes (offsets relative to now; negative = in the past)
# ---------------------------------------------------------------------------------------------


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _m(minutes: float) -> timedelta:
    return timedelta(minutes=minutes)


def _h(hours: float) -> timedelta:
    return timedelta(hours=hours)


def _d(days: float) -> timedelta:
    return timedelta(days=days)


REMEDIATE = "remediate"
BILLING = "billing-sync"

# label, workflow, status, created, started, finished (offsets; None = not yet), owner, claims,
# input. What only some have is in the tables after this one.
HISTORY: list[tuple[str, str, str, timedelta, timedelta | None, timedelta | None, str | None, int, Any]] = [
    # Full happy path: fix retried twice, approved by alice, slept, opened a PR. Last hour.
    ("approved", REMEDIATE, "success", -_m(50), -_m(50), -_m(44), "worker-a", 2, {"pod": "api-1"}),
    # Bob rejected the fix; the workflow returned normally. Last hour.
    ("rejected", REMEDIATE, "success", -_m(35), -_m(35), -_m(30), "worker-b", 2, {"pod": "api-2"}),
    # Waiting on an approval gate opened 10 minutes ago, 2-day deadline.
    ("pending_approval", REMEDIATE, "waiting", -_m(12), -_m(12), None, "worker-a", 1, {"pod": "api-3"}),
    # Waiting on an approval gate opened almost 3 hours ago, no deadline.
    ("pending_approval_old", REMEDIATE, "waiting", -_h(3), -_h(3), None, "worker-b", 1, {"pod": "db-1"}),
    # Approved by carol, now in its durable cool-down sleep (wakes in a minute).
    ("sleeping", REMEDIATE, "waiting", -_m(8), -_m(8), None, "worker-a", 2, {"pod": "api-4"}),
    # Nobody decided within the 2-hour deadline.
    ("timed_out", REMEDIATE, "success", -_h(5), -_h(5), -_h(3), "worker-b", 2, {"pod": "cache-1"}),
    # Failed for good 3 days ago: fix failed 3 times.
    ("failed_recent", REMEDIATE, "error", -_d(3), -_d(3), -_d(3) + _m(1), "worker-a", 1, {"pod": "api-5"}),
    # Failed 20 minutes ago: fetch failed twice.
    ("failed_last_hour", BILLING, "error", -_m(25), -_m(25), -_m(20), "worker-b", 1, {"account": 7}),
    # Failed 40 days ago (outside "this month").
    ("failed_old", BILLING, "error", -_d(40), -_d(40), -_d(40) + _s(30), "worker-old", 1, {"account": 1}),
    # Running now on worker-a, lease live.
    ("running", BILLING, "running", -_s(45), -_s(40), None, "worker-a", 1, {"account": 8}),
    # Running on a worker that went silent: lease expired 5 minutes ago.
    ("stuck", BILLING, "running", -_m(7), -_m(6), None, "worker-dead", 1, {"account": 9}),
    # Queued and due.
    ("enqueued", BILLING, "enqueued", -_m(2), None, None, None, 0, {"account": 10}),
    # Queued, not due for an hour.
    ("delayed", BILLING, "enqueued", -_m(1), None, None, None, 0, {"account": 11}),
    # Queued, high priority.
    ("enqueued_remediate", REMEDIATE, "enqueued", -_s(30), None, None, None, 0, {"pod": "api-6"}),
    # Cancelled by alice while waiting for approval.
    ("cancelled", REMEDIATE, "cancelled", -_m(20), -_m(20), -_m(15), "worker-a", 1, {"pod": "api-7"}),
    # Errored 2 hours ago, re-enqueued by carol, then succeeded. Last hour.
    ("requeued", BILLING, "success", -_h(2), -_h(2), -_m(55), "worker-b", 2, {"account": 12}),
    # Quick success finishing at the very same instant as failed_last_hour.
    ("quick", BILLING, "success", -_m(21), -_m(21), -_m(20), "worker-b", 1, {"account": 13}),
]

# What the successful executions returned.
OUTPUTS: dict[str, Any] = {
    "approved": {"pr": 101},
    "rejected": {"rejected_by": "bob"},
    "timed_out": {"rejected_by": None},
    "requeued": {"posted": 3},
    "quick": {"posted": 1},
}

# What the failed and cancelled executions recorded as their error.
ERRORS: dict[str, str] = {
    "failed_recent": "step 'fix' failed 3 times: PermissionError: forbidden",
    "failed_last_hour": "step 'fetch' failed 2 times: ConnectionError: upstream 502",
    "failed_old": "step 'fetch' failed once: KeyError: 'amount'",
    "cancelled": "wrong pod",
}

# Lease expiry of the running executions (offset), run_at of the delayed one (offset; the others
# are due when created) and the one priority that is not 0.
LEASES: dict[str, timedelta] = {"running": _s(25), "stuck": -_m(5)}
RUN_AT: dict[str, timedelta] = {"delayed": _h(1)}
PRIORITIES: dict[str, int] = {"enqueued_remediate": 5}

# label, step, attempt, owner, started (offset), duration in ms (None = still running), error.
ATTEMPTS: list[tuple[str, str, int, str, timedelta, int | None, str | None]] = [
    ("approved", "rca", 1, "worker-a", -_m(50), 2000, None),
    ("approved", "fix", 1, "worker-a", -_m(50) + _s(5), 3000, "TimeoutError: kubectl timed out"),
    ("approved", "fix", 2, "worker-a", -_m(50) + _s(10), 4000, "TimeoutError: kubectl timed out"),
    ("approved", "fix", 3, "worker-a", -_m(50) + _s(20), 5000, None),
    ("approved", "open-pr", 1, "worker-a", -_m(44) - _s(10), 8000, None),
    ("rejected", "rca", 1, "worker-b", -_m(35), 1000, None),
    ("rejected", "fix", 1, "worker-b", -_m(35) + _s(2), 6000, None),
    ("pending_approval", "rca", 1, "worker-a", -_m(12), 2500, None),
    ("pending_approval", "fix", 1, "worker-a", -_m(11), 3500, None),
    ("pending_approval_old", "rca", 1, "worker-b", -_h(3), 1500, None),
    ("pending_approval_old", "fix", 1, "worker-b", -_h(3) + _s(5), 7000, None),
    ("sleeping", "rca", 1, "worker-a", -_m(8), 1200, None),
    ("sleeping", "fix", 1, "worker-a", -_m(8) + _s(2), 2400, None),
    ("timed_out", "rca", 1, "worker-b", -_h(5), 3000, None),
    ("timed_out", "fix", 1, "worker-b", -_h(5) + _s(4), 9000, None),
    ("failed_recent", "rca", 1, "worker-a", -_d(3), 2000, None),
    ("failed_recent", "fix", 1, "worker-a", -_d(3) + _s(3), 1000, "PermissionError: forbidden"),
    ("failed_recent", "fix", 2, "worker-a", -_d(3) + _s(10), 1000, "PermissionError: forbidden"),
    ("failed_recent", "fix", 3, "worker-a", -_d(3) + _s(30), 1000, "PermissionError: forbidden"),
    ("failed_last_hour", "fetch", 1, "worker-b", -_m(25), 500, "ConnectionError: upstream 502"),
    ("failed_last_hour", "fetch", 2, "worker-b", -_m(21), 700, "ConnectionError: upstream 502"),
    ("failed_old", "fetch", 1, "worker-old", -_d(40), 300, "KeyError: 'amount'"),
    ("running", "fetch", 1, "worker-a", -_s(40), 1500, None),
    ("running", "post", 1, "worker-a", -_s(10), None, None),
    ("stuck", "fetch", 1, "worker-dead", -_m(6) + _s(10), None, None),
    ("cancelled", "rca", 1, "worker-a", -_m(20), 1800, None),
    ("cancelled", "fix", 1, "worker-a", -_m(20) + _s(2), 2200, None),
    ("requeued", "fetch", 1, "worker-b", -_h(2), 400, "ConnectionError: upstream 503"),
    ("requeued", "fetch", 2, "worker-b", -_m(56), 600, None),
    ("requeued", "post", 1, "worker-b", -_m(55) - _s(5), 900, None),
    ("quick", "fetch", 1, "worker-b", -_m(21), 200, None),
    ("quick", "post", 1, "worker-b", -_m(20) - _s(1), 300, None),
]

# label, step, kind, created, wake_at, resolved, decision, decided_by, comment, details.
WAITS: list[tuple] = [
    (
        "approved",
        "approve-fix",
        "approval",
        -_m(49),
        -_m(49) + _d(2),
        -_m(45),
        "approved",
        "alice",
        "lgtm",
        {"patch": "restart api-1"},
    ),
    ("approved", "cool-down", "sleep", -_m(45), -_m(44) - _s(30), -_m(44) - _s(30), None, None, None, None),
    (
        "rejected",
        "approve-fix",
        "approval",
        -_m(34),
        -_m(34) + _d(2),
        -_m(31),
        "rejected",
        "bob",
        "too risky: it's prod",
        {"patch": "drop index on api-2"},
    ),
    (
        "pending_approval",
        "approve-fix",
        "approval",
        -_m(10),
        -_m(10) + _d(2),
        None,
        None,
        None,
        None,
        {"patch": "scale api-3 to 3"},
    ),
    (
        "pending_approval_old",
        "approve-fix",
        "approval",
        -_h(3) + _m(1),
        None,
        None,
        None,
        None,
        None,
        {"patch": "failover db-1"},
    ),
    (
        "sleeping",
        "approve-fix",
        "approval",
        -_m(7),
        -_m(7) + _d(2),
        -_m(6),
        "approved",
        "carol",
        "ok",
        {"patch": "restart api-4"},
    ),
    ("sleeping", "cool-down", "sleep", -_m(6), _m(1), None, None, None, None, None),
    (
        "timed_out",
        "approve-fix",
        "approval",
        -_h(5) + _m(1),
        -_h(3),
        -_h(3),
        "timed_out",
        None,
        None,
        {"patch": "flush cache-1"},
    ),
    (
        "cancelled",
        "approve-fix",
        "approval",
        -_m(18),
        -_m(18) + _d(2),
        -_m(15),
        None,
        None,
        None,
        {"patch": "restart api-7"},
    ),
]

# Who did what: decisions (as decide_approval records them), a cancel and a requeue.
# at, actor, action, label, step, comment, from_status.
ACTIONS: list[tuple] = [
    (-_m(45), "alice", "approve", "approved", "approve-fix", "lgtm", "waiting"),
    (-_m(31), "bob", "reject", "rejected", "approve-fix", "too risky: it's prod", "waiting"),
    (-_m(6), "carol", "approve", "sleeping", "approve-fix", "ok", "waiting"),
    (-_m(15), "alice", "cancel", "cancelled", None, "wrong pod", "waiting"),
    (-_m(58), "carol", "requeue", "requeued", None, "upstream fixed", "error"),
]

# worker_id, hostname, pid, workflows, concurrency, started, last_heartbeat, stopped.
WORKERS: list[tuple] = [
    ("worker-a", "host-a", 101, [REMEDIATE, BILLING], 8, -_h(6), -_s(3), None),
    ("worker-b", "host-b", 202, [REMEDIATE, BILLING], 4, -_h(6), -_s(4), None),
    ("worker-dead", "host-c", 303, [BILLING], 2, -_h(1), -_m(10), None),
    ("worker-old", "host-a", 99, [REMEDIATE, BILLING], 8, -_d(41), -_d(1), -_d(1)),
]

# Step outputs written for successful steps (anything else gets {"step": step_id}).
STEP_OUTPUTS: dict[tuple[str, str], Any] = {
    ("approved", "open-pr"): 101,
    ("approved", "fix"): {"patch": "restart api-1"},
}

# ---------------------------------------------------------------------------------------------
# SQL
# ---------------------------------------------------------------------------------------------

NOW = "SELECT now()"

INSERT_EXECUTION = """
INSERT INTO workflow_executions
    (workflow_name, status, input, output, error, owner_id, lease_expires, claim_epoch, priority,
     run_at, claims, created_at, updated_at, started_at, finished_at)
VALUES (%(workflow_name)s, %(status)s, %(input)s, %(output)s, %(error)s, %(owner_id)s,
        %(lease_expires)s, %(claims)s, %(priority)s, %(run_at)s, %(claims)s, %(created_at)s,
        %(updated_at)s, %(started_at)s, %(finished_at)s)
RETURNING id
"""

INSERT_ATTEMPT = """
INSERT INTO step_attempts
    (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, finished_at, outcome, error)
VALUES (%(execution_id)s, %(step_id)s, %(attempt)s, %(owner_id)s, 1, %(started_at)s,
        %(finished_at)s, %(outcome)s, %(error)s)
"""

INSERT_OUTPUT = """
INSERT INTO operation_outputs (execution_id, step_id, output, error, started_at, created_at, attempts, owner_id)
VALUES (%(execution_id)s, %(step_id)s, %(output)s, %(error)s, %(started_at)s, %(created_at)s,
        %(attempts)s, %(owner_id)s)
"""

INSERT_WAIT = """
INSERT INTO workflow_waits
    (execution_id, step_id, kind, wake_at, details, created_at, resolved_at, decision, decided_by,
     comment, decided_at)
VALUES (%(execution_id)s, %(step_id)s, %(kind)s, %(wake_at)s, %(details)s, %(created_at)s,
        %(resolved_at)s, %(decision)s, %(decided_by)s, %(comment)s, %(decided_at)s)
"""

INSERT_WORKER = """
INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, started_at, last_heartbeat, stopped_at)
VALUES (%(worker_id)s, %(hostname)s, %(pid)s, %(workflows)s, %(concurrency)s, %(started_at)s,
        %(last_heartbeat)s, %(stopped_at)s)
"""

INSERT_ACTION = """
INSERT INTO operator_actions (at, actor, action, execution_id, step_id, comment, from_status, db_user)
VALUES (%(at)s, %(actor)s, %(action)s, %(execution_id)s, %(step_id)s, %(comment)s, %(from_status)s,
        -- a decision's audit row matches its wait row, which records no role here (as before
        -- schema version 5); the other actions keep the seeding login's
        CASE WHEN %(action)s IN ('approve', 'reject') THEN NULL ELSE session_user END)
"""


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


# ---------------------------------------------------------------------------------------------
# seed_history
# ---------------------------------------------------------------------------------------------


def seed_history(conn: psycopg.Connection) -> SeedFacts:
    """Insert the fixed story above (one transaction) and return what was written.

    Labels (``facts.id(label)``): approved, rejected, pending_approval, pending_approval_old,
    sleeping, timed_out, failed_recent, failed_last_hour, failed_old, running, stuck, enqueued,
    delayed, enqueued_remediate, cancelled, requeued, quick. Workers: worker-a, worker-b
    (alive), worker-dead (silent 10 minutes, holds the stuck lease), worker-old (stopped).
    """
    now = conn.execute(NOW).fetchone()[0]
    facts = SeedFacts(now=now)
    with conn.transaction():
        # In the order they were created, as the engine writes them: ids grow with created_at
        # (the console's time windows rely on it; kestrel_console/read/executions.py ID_BOUNDS).
        for row in sorted(HISTORY, key=lambda row: row[3]):
            facts.executions[row[0]] = _insert_execution(conn, now, *row)
        for row in ATTEMPTS:
            facts.attempts.append(_insert_attempt(conn, now, facts, *row))
        for row in WAITS:
            facts.waits.append(_insert_wait(conn, now, facts, *row))
        for out in _derive_outputs(facts):
            conn.execute(INSERT_OUTPUT, {**out.__dict__, "output": _json(out.output)})
            facts.outputs.append(out)
        for row in WORKERS:
            facts.workers.append(_insert_worker(conn, now, *row))
        for row in ACTIONS:
            facts.actions.append(_insert_action(conn, now, facts, *row))
    return facts


def _insert_execution(
    conn: psycopg.Connection,
    now: datetime,
    label: str,
    workflow: str,
    status: str,
    created: timedelta,
    started: timedelta | None,
    finished: timedelta | None,
    owner: str | None,
    claims: int,
    input: Any,
) -> SeededExecution:
    created_at = now + created
    started_at = None if started is None else now + started
    finished_at = None if finished is None else now + finished
    values = dict(
        workflow_name=workflow,
        status=status,
        input=input,
        output=OUTPUTS.get(label),
        error=ERRORS.get(label),
        owner_id=owner,
        lease_expires=now + LEASES[label] if label in LEASES else None,
        priority=PRIORITIES.get(label, 0),
        run_at=now + RUN_AT[label] if label in RUN_AT else created_at,
        claims=claims,
        created_at=created_at,
        updated_at=finished_at or started_at or created_at,
        started_at=started_at,
        finished_at=finished_at,
    )
    params = {**values, "input": _json(values["input"]), "output": _json(values["output"])}
    (execution_id,) = conn.execute(INSERT_EXECUTION, params).fetchone()
    return SeededExecution(id=execution_id, label=label, **values)


def _insert_attempt(
    conn: psycopg.Connection,
    now: datetime,
    facts: SeedFacts,
    label: str,
    step_id: str,
    attempt: int,
    owner: str,
    started: timedelta,
    duration_ms: int | None,
    error: str | None,
) -> SeededAttempt:
    execution = facts.executions[label]
    started_at = now + started
    finished_at = None if duration_ms is None else started_at + timedelta(milliseconds=duration_ms)
    outcome = "running" if finished_at is None else ("error" if error else "success")
    row = SeededAttempt(
        execution.id, label, execution.workflow_name, step_id, attempt, owner, started_at, finished_at, outcome, error
    )
    conn.execute(INSERT_ATTEMPT, {k: v for k, v in row.__dict__.items() if k not in ("label", "workflow_name")})
    return row


def _insert_wait(
    conn: psycopg.Connection,
    now: datetime,
    facts: SeedFacts,
    label: str,
    step_id: str,
    kind: str,
    created: timedelta,
    wake_at: timedelta | None,
    resolved: timedelta | None,
    decision: str | None,
    decided_by: str | None,
    comment: str | None,
    details: Any,
) -> SeededWait:
    execution = facts.executions[label]
    resolved_at = None if resolved is None else now + resolved
    row = SeededWait(
        execution_id=execution.id,
        label=label,
        workflow_name=execution.workflow_name,
        step_id=step_id,
        kind=kind,
        created_at=now + created,
        wake_at=None if wake_at is None else now + wake_at,
        resolved_at=resolved_at,
        decision=decision,
        decided_by=decided_by,
        comment=comment,
        decided_at=resolved_at if decision else None,
        details=details,
    )
    params = {k: v for k, v in row.__dict__.items() if k not in ("label", "workflow_name")}
    conn.execute(INSERT_WAIT, {**params, "details": _json(details)})
    return row


def _derive_outputs(facts: SeedFacts) -> list[SeededOutput]:
    """The checkpoints a worker would have written for the attempts and waits above."""
    outputs: list[SeededOutput] = []
    steps: dict[tuple[str, str], list[SeededAttempt]] = {}
    for a in facts.attempts:
        steps.setdefault((a.label, a.step_id), []).append(a)
    for (label, step_id), attempts in steps.items():
        last = attempts[-1]
        execution = facts.executions[label]
        failed_for_good = last.outcome == "error" and execution.status == "error"
        if last.outcome != "success" and not failed_for_good:
            continue
        outputs.append(
            SeededOutput(
                execution_id=execution.id,
                label=label,
                step_id=step_id,
                output=STEP_OUTPUTS.get((label, step_id), {"step": step_id}) if not failed_for_good else None,
                error=last.error if failed_for_good else None,
                started_at=attempts[0].started_at,
                created_at=last.finished_at,
                attempts=len(attempts),
                owner_id=last.owner_id,
            )
        )
    for w in facts.waits:
        if w.kind == "approval" and w.decision:
            value = {
                "approved": w.decision == "approved",
                "by": w.decided_by,
                "comment": w.comment,
                "timed_out": w.decision == "timed_out",
                "decided_at": w.decided_at.isoformat(),
            }
        elif w.kind == "sleep" and w.resolved_at is not None:
            value = None
        else:
            continue
        outputs.append(
            SeededOutput(
                execution_id=w.execution_id,
                label=w.label,
                step_id=w.step_id,
                output=value,
                error=None,
                started_at=w.created_at,
                created_at=w.resolved_at,
                attempts=1,
                owner_id=facts.executions[w.label].owner_id,
            )
        )
    return outputs


def _insert_worker(
    conn: psycopg.Connection,
    now: datetime,
    worker_id: str,
    hostname: str,
    pid: int,
    workflows: list[str],
    concurrency: int,
    started: timedelta,
    heartbeat: timedelta,
    stopped: timedelta | None,
) -> SeededWorker:
    row = SeededWorker(
        worker_id,
        hostname,
        pid,
        workflows,
        concurrency,
        now + started,
        now + heartbeat,
        None if stopped is None else now + stopped,
    )
    conn.execute(INSERT_WORKER, row.__dict__)
    return row


def _insert_action(
    conn: psycopg.Connection,
    now: datetime,
    facts: SeedFacts,
    at: timedelta,
    actor: str,
    action: str,
    label: str,
    step_id: str | None,
    comment: str | None,
    from_status: str | None,
) -> SeededAction:
    row = SeededAction(now + at, actor, action, facts.id(label), label, step_id, comment, from_status)
    conn.execute(INSERT_ACTION, {k: v for k, v in row.__dict__.items() if k != "label"})
    return row


# ---------------------------------------------------------------------------------------------
# seed_bulk_finished
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkFacts:
    first_id: int
    last_id: int
    count: int


# Row i (1..n) finished i * spread / n before now, ran for 2 seconds; every 10th errored.
BULK_EXECUTIONS = """
INSERT INTO workflow_executions
    (workflow_name, status, input, output, error, owner_id, claims, claim_epoch, run_at,
     created_at, updated_at, started_at, finished_at)
SELECT %(workflow_name)s,
       CASE WHEN %(with_errors)s AND i %% 10 = 0 THEN 'error' ELSE 'success' END,
       jsonb_build_object('n', i),
       CASE WHEN %(with_errors)s AND i %% 10 = 0 THEN NULL ELSE jsonb_build_object('ok', i) END,
       CASE WHEN %(with_errors)s AND i %% 10 = 0 THEN 'step ''work'' failed once: boom ' || i END,
       %(owner_id)s, 1, 1, t.fin - interval '3 seconds', t.fin - interval '3 seconds', t.fin,
       t.fin - interval '2 seconds', t.fin
  FROM generate_series(1, %(n)s::int) AS i,
       LATERAL (SELECT %(now)s::timestamptz - %(spread)s::interval * i / %(n)s::int AS fin) AS t
 ORDER BY i DESC
RETURNING id
"""

# One successful step per execution of the range, for timeline/slowest-steps scale tests.
BULK_STEPS = """
WITH e AS (
    SELECT id, started_at, finished_at, owner_id FROM workflow_executions
     WHERE id BETWEEN %(first)s AND %(last)s
), a AS (
    INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, finished_at, outcome)
    SELECT id, 'work', 1, owner_id, 1, started_at, finished_at - interval '100 milliseconds', 'success' FROM e
)
INSERT INTO operation_outputs (execution_id, step_id, output, started_at, created_at, attempts, owner_id)
SELECT id, 'work', '{"ok": true}', started_at, finished_at - interval '100 milliseconds', 1, owner_id FROM e
"""


def seed_bulk_finished(
    conn: psycopg.Connection,
    n: int,
    *,
    workflow_name: str = "bulk",
    spread: timedelta = timedelta(days=30),
    with_steps: bool = False,
    with_errors: bool = True,
    owner_id: str = "worker-bulk",
    analyze: bool = True,
) -> BulkFacts:
    """Insert ``n`` finished executions with one INSERT ... SELECT generate_series.

    Finish times are spread evenly over the ``spread`` before now (the newest has the highest
    id); every 10th one errored unless ``with_errors`` is False. ``with_steps`` also writes one
    step attempt and checkpoint per execution. ANALYZE runs afterwards so plans are realistic.
    """
    now = conn.execute(NOW).fetchone()[0]
    params = {
        "workflow_name": workflow_name,
        "n": n,
        "now": now,
        "spread": spread,
        "with_errors": with_errors,
        "owner_id": owner_id,
    }
    with conn.transaction():
        ids = [r[0] for r in conn.execute(BULK_EXECUTIONS, params).fetchall()]
        if not ids:
            return BulkFacts(0, 0, 0)
        first, last = min(ids), max(ids)
        if with_steps:
            conn.execute(BULK_STEPS, {"first": first, "last": last})
    if analyze:
        conn.execute("ANALYZE workflow_executions")
        if with_steps:
            conn.execute("ANALYZE step_attempts")
            conn.execute("ANALYZE operation_outputs")
    return BulkFacts(first, last, len(ids))


PARENT = "INSERT INTO workflow_executions (workflow_name, status) VALUES ('fan', 'waiting') RETURNING id"
CHILD = "INSERT INTO workflow_executions (workflow_name, status, parent_id) VALUES (%s, %s, %s) RETURNING id"


def seed_family(conn: psycopg.Connection, children: list[tuple[str, str]]) -> tuple[int, list[int]]:
    """A ``fan`` execution waiting on its children, one a (workflow, status); (its id, theirs)."""
    parent = conn.execute(PARENT).fetchone()[0]
    return parent, [conn.execute(CHILD, (name, status, parent)).fetchone()[0] for name, status in children]


def cancelled_mid_step(app: Any, db: psycopg.Connection) -> int:
    """An execution claimed by a worker, one step finished and one running, then cancelled."""
    eid = app.enqueue("deploy", {"env": "prod"})
    db.execute(
        "UPDATE workflow_executions SET status = 'running', owner_id = 'w1', claim_epoch = 1, "
        "lease_expires = now() + interval '30 s', started_at = now() - interval '10 s' WHERE id = %s",
        (eid,),
    )
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, "
        "finished_at, outcome) VALUES (%s, 'build', 1, 'w1', 1, now() - interval '9 s', "
        "now() - interval '6 s', 'success')",
        (eid,),
    )
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, started_at) "
        "VALUES (%s, 'rollout', 1, 'w1', 1, now() - interval '5 s')",
        (eid,),
    )
    app.cancel(eid, by="alice", comment="wrong cluster")
    return eid


def waiting_on_gate(db: psycopg.Connection, gate: str = "approve-fix") -> int:
    """An execution parked on an undecided approval gate, as a worker leaves it."""
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('remediate', 'waiting') RETURNING id"
    ).fetchone()[0]
    db.execute("INSERT INTO workflow_waits (execution_id, step_id, kind) VALUES (%s, %s, 'approval')", (eid, gate))
    return eid


@contextmanager
def awaiting_payment(dsn: str) -> Iterator[tuple[Kestrel, int]]:
    """An execution of ``checkout`` waiting for the event ``payment:A-17`` (its output will be
    the event's payload), a worker running: (the app, the execution's id)."""
    app = Kestrel(dsn)

    @app.workflow("checkout")
    def checkout(ctx: Any, order: str) -> Any:
        return ctx.wait_for_event(f"payment:{order}").payload

    worker = app.worker(concurrency=1, poll_interval=0.2, sweep_interval=0.2)
    worker.start()
    try:
        eid = app.enqueue("checkout", "A-17")
        wait_for(lambda: app.get(eid).status == "waiting", what="the execution to wait for its event")
        yield app, eid
    finally:
        worker.stop()
        app.close()
