"""`show` prints every approval gate's decision, who made it, their comment and when; `status`
summarises pending approvals in a few one-line entries and names the command that lists them."""

from __future__ import annotations

import psycopg

from kestrel_console.formatting import short_time

from .script import console


def gate(
    db: psycopg.Connection,
    eid: int,
    step: str,
    *,
    age: str,
    decision: str | None = None,
    by: str | None = None,
    comment: str | None = None,
    details: str | None = None,
) -> None:
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, resolved_at, decision, decided_by,"
        " comment, decided_at, details) VALUES (%s, %s, 'approval', now() - %s::interval,"
        " CASE WHEN %s::text IS NULL THEN NULL ELSE now() END, %s, %s, %s,"
        " CASE WHEN %s::text IS NULL THEN NULL ELSE now() END, %s::jsonb)",
        (eid, step, age, decision, decision, by, comment, decision, details),
    )
    if decision in ("approved", "rejected"):  # its audit row, matching it (no role on either: pre-version 5)
        db.execute(
            "INSERT INTO operator_actions (actor, action, execution_id, step_id, comment, from_status, db_user)"
            " VALUES (%s, %s, %s, %s, %s, 'waiting', NULL)",
            (by, "approve" if decision == "approved" else "reject", eid, step, comment),
        )


def execution(db: psycopg.Connection, status: str = "waiting", name: str = "remediate-incident") -> int:
    return db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, started_at) "
        "VALUES (%s, %s, now() - interval '1 hour') RETURNING id",
        (name, status),
    ).fetchone()[0]


def test_show_prints_each_gates_decision_who_comment_and_when(dsn: str, db: psycopg.Connection) -> None:
    eid = execution(db)
    gate(db, eid, "approve-fix", age="10 minutes", decision="approved", by="alice", comment="lgtm, dry run was clean")
    gate(db, eid, "approve-rollout", age="5 minutes", decision="rejected", by="bob", comment="not on a Friday")
    gate(db, eid, "approve-cleanup", age="1 minute")
    decided_at = db.execute("SELECT decided_at FROM workflow_waits WHERE step_id = 'approve-fix'").fetchone()[0]
    done = console("show", str(eid), dsn=dsn)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "approvals" in lines
    decisions = lines[lines.index("approvals") + 1 :]
    assert decisions[0].startswith("approve-fix  approved by alice at ")
    assert decisions[0].endswith(': "lgtm, dry run was clean"')
    assert f" at {short_time(decided_at)}: " in decisions[0]
    assert decisions[1].startswith("approve-rollout  rejected by bob at ") and decisions[1].endswith(
        ': "not on a Friday"'
    )
    assert decisions[2].startswith("approve-cleanup  pending since ")


def test_status_summarises_pending_approvals_one_line_each(dsn: str, db: psycopg.Connection) -> None:
    long_details = '{"patch": "' + "raise the memory limit of every pod of the api deployment " * 3 + '"}'
    for n in range(12):
        gate(db, execution(db), "approve-fix", age=f"{60 - n} minutes", details=long_details)
    done = console("status", dsn=dsn, env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Pending approvals"))
    assert lines[head] == "Pending approvals: 12, oldest waiting 1 h 00 m"
    entries = lines[head + 1 : head + 6]
    assert all(line.startswith("  #") and "approve-fix  waiting" in line for line in entries), entries
    assert all(len(line) <= 100 for line in entries)
    assert lines[head + 6] == "  … and 7 more; all of them: kestrel-console report pending-approvals"
    assert not any(line.startswith("  #") for line in lines[head + 7 :])
    listed = console("report", "pending-approvals", "--format", "csv", dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 1 + 12


def test_status_with_no_pending_approvals_says_none(dsn: str, db: psycopg.Connection) -> None:
    execution(db, status="enqueued")
    done = console("status", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert "Pending approvals: none" in done.stdout.splitlines()


def test_status_lists_live_workers_and_collapses_stopped_ones(dsn: str, db: psycopg.Connection) -> None:
    for n in range(2):
        db.execute(
            "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency) "
            "VALUES (%s, 'h', 1, ARRAY['ci-pipeline'], 4)",
            (f"live-{n}",),
        )
    for n in range(7):
        db.execute(
            "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, stopped_at, "
            "last_heartbeat) VALUES (%s, 'h', 1, ARRAY['ci-pipeline'], 4, now() - interval '5 minutes', "
            "now() - interval '5 minutes')",
            (f"old-{n}",),
        )
    done = console("status", dsn=dsn)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rows = [line for line in lines if line.startswith(("live-", "old-"))]
    assert [row.split()[0] for row in rows] == ["live-0", "live-1"]
    assert "7 stopped or silent in the last hour: old-0, old-1, old-2, old-3, old-4 and 2 more" in lines
