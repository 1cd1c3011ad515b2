"""`kestrel-console pause` / `resume` (issue 47): one line saying what was done, a refusal one
clear line with exit 1 changing nothing; a paused execution has its own count in `status`
(table and json), and `show` says who paused it, when, why, and how to resume it."""

from __future__ import annotations

import json

import psycopg

from kestrel_core import Kestrel
from tests.cli.script import console, one_clear_line


def test_pause_and_resume_print_what_they_did_and_status_counts_paused(
    app: Kestrel, dsn: str, db: psycopg.Connection
) -> None:
    eid = app.enqueue("billing", {"n": 1})
    app.enqueue("billing", {"n": 2})
    done = console("pause", str(eid), "--comment", "bad invoice", "--operator", "alice", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"paused execution {eid} (was enqueued); resume with: kestrel-console resume {eid}")
    rows = json.loads(console("status", "--format", "json", dsn=dsn).stdout)
    assert [(r["workflow_name"], r["enqueued"], r["paused"], r["total"]) for r in rows] == [("billing", 1, 1, 2)]
    table = console("status", dsn=dsn, env={"COLUMNS": "200"}).stdout
    assert "paused" in table, table
    listed = json.loads(console("list", "--status", "paused", "--format", "json", dsn=dsn).stdout)
    assert [r["id"] for r in listed] == [eid]

    shown = console("show", str(eid), dsn=dsn, env={"COLUMNS": "200"}).stdout
    assert "paused" in shown and "by alice" in shown and "'bad invoice'" in shown, shown
    assert f"kestrel-console resume {eid}" in shown, shown
    blocker = json.loads(console("show", str(eid), "--format", "json", dsn=dsn).stdout)[0]["blocker"]
    assert blocker.startswith("it is paused (by alice at "), blocker

    done = console("resume", str(eid), "--operator", "bob", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"resumed execution {eid} (now enqueued)"
    assert db.execute(
        "SELECT actor, action, comment FROM operator_actions WHERE execution_id = %s ORDER BY id", (eid,)
    ).fetchall() == [("alice", "pause", "bad invoice"), ("bob", "resume", None)]


def test_pause_and_resume_refusals_are_one_line_and_change_nothing(
    app: Kestrel, dsn: str, db: psycopg.Connection
) -> None:
    eid = app.enqueue("billing", {"n": 1})
    one_clear_line(console("resume", str(eid), dsn=dsn), 1, f"execution {eid} is not paused (it is enqueued)")
    db.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() WHERE id = %s", (eid,))
    one_clear_line(console("pause", str(eid), dsn=dsn), 1, f"execution {eid} already finished (success)")
    one_clear_line(console("pause", "999999", dsn=dsn), 1, "no execution with id 999999")
    one_clear_line(console("pause", "nope", dsn=dsn), 2, "ID")
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)
