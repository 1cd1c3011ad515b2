"""`cancel|requeue|fork --where FILTER --dry-run` and `--token T` (issue 47): the preview prints
the count, a sample, the exact ids (as ranges) and the command to act with, and changes nothing;
each wrong use is one clear line with exit 2 (usage) or 1 (a token refused); `bulk status`
says what a batch did and why rows were refused."""

from __future__ import annotations

import json
import re

import psycopg

from kestrel_console.cli.bulk_commands import id_ranges
from kestrel_core import Kestrel
from tests.cli.script import console, one_clear_line


def test_id_ranges_are_exact_and_short() -> None:
    assert id_ranges([5, 1, 2, 3, 9, 10, 3]) == "1-3, 5, 9-10"
    assert id_ranges([]) == ""


def test_dry_run_prints_the_ids_and_the_command_and_changes_nothing(
    app: Kestrel, dsn: str, db: psycopg.Connection
) -> None:
    ids = app.enqueue_many("pay", [{"region": "eu" if i % 2 else "us"} for i in range(12)])
    app.enqueue("other", {"region": "eu"})
    shown = console("cancel", "--where", "workflow:pay input.region=eu", "--dry-run", dsn=dsn)
    assert shown.returncode == 0, shown.stderr
    eu = [i for i in ids if i % 2 == 0]  # ids start at 1: the odd inputs are the even ids
    out = shown.stdout
    assert "cancel: 6 executions selected by workflow:pay input.region=eu" in out
    assert "now: enqueued 6" in out
    assert f"ids: {id_ranges(eu)}" in out
    token = re.search(r"token: (b\d+-[0-9a-f]{12}) \(acts on exactly these 6 ids", out)
    assert token, out
    assert f"to act: kestrel-console cancel --token {token[1]}" in out
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE status <> 'enqueued'").fetchone() == (0,)
    assert db.execute("SELECT action FROM operator_actions").fetchall() == [("bulk",)]

    acted = console("cancel", "--token", token[1], "--operator", "carol", dsn=dsn)
    assert acted.returncode == 0, acted.stderr
    assert acted.stdout.splitlines()[0] == f"cancel {token[1]}: 6 cancelled, 0 refused, 0 left (of 6)"
    assert db.execute(
        "SELECT count(*) FROM operator_actions WHERE action = 'cancel' AND actor = 'carol' AND batch_id IS NOT NULL"
    ).fetchone() == (6,)
    status = console("bulk", "status", token[1], dsn=dsn)
    assert status.returncode == 0, status.stderr
    assert "6 rows: 6 cancelled, 0 refused, 0 left" in status.stdout
    assert "filter: workflow:pay input.region=eu" in status.stdout
    listed = console("bulk", "list", "--format", "json", dsn=dsn)
    assert [b["token"] for b in json.loads(listed.stdout)] == [token[1]]


def test_bulk_fork_freezes_its_step_and_reports_refusals(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("three", [{"n": i} for i in range(3)])
    for eid in ids[:2]:
        db.execute(
            "INSERT INTO operation_outputs (execution_id, step_id, output, seq) VALUES (%s, 'a', '1', 1)", (eid,)
        )
        db.execute("UPDATE workflow_executions SET status = 'error', finished_at = now() WHERE id = %s", (eid,))
    shown = console("fork", "--where", "workflow:three", "--from-step", "a", "--dry-run", "--format", "json", dsn=dsn)
    assert shown.returncode == 0, shown.stderr
    preview = json.loads(shown.stdout)
    assert preview["params"] == {"from_step": "a"} and preview["ids"] == ids
    one_clear_line(console("fork", "--token", preview["token"], "--from-step", "b", dsn=dsn), 2, "frozen")
    acted = console("fork", "--token", preview["token"], dsn=dsn)
    assert acted.returncode == 0, acted.stderr
    assert "2 forked, 1 refused, 0 left (of 3)" in acted.stdout
    assert "cannot fork: execution # is enqueued" in acted.stdout
    refused = console("bulk", "status", preview["token"], "--rows", "refused", "--format", "json", dsn=dsn)
    assert [r["execution_id"] for r in json.loads(refused.stdout)] == [ids[2]]
    assert db.execute("SELECT count(*) FROM execution_forks").fetchone() == (2,)


def test_bulk_pause_and_resume_by_filter(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("pay", [{"n": i} for i in range(3)])
    shown = console("pause", "--where", "workflow:pay", "--dry-run", "--format", "json", dsn=dsn)
    assert shown.returncode == 0, shown.stderr
    preview = json.loads(shown.stdout)
    assert preview["ids"] == ids and preview["command"] == f"kestrel-console pause --token {preview['token']}"
    acted = console("pause", "--token", preview["token"], "--comment", "incident 7", dsn=dsn)
    assert acted.returncode == 0, acted.stderr
    assert acted.stdout.splitlines()[0] == f"pause {preview['token']}: 3 paused, 0 refused, 0 left (of 3)"
    assert db.execute("SELECT DISTINCT status FROM workflow_executions").fetchall() == [("paused",)]
    app.resume(ids[0], by="b")
    shown = console("resume", "--where", "workflow:pay", "--dry-run", dsn=dsn)
    assert "resume: 3 executions selected by workflow:pay" in shown.stdout, shown
    assert "resume acts on paused executions" in shown.stdout
    token = re.search(r"to act: kestrel-console resume --token (\S+)", shown.stdout)
    assert token, shown.stdout
    acted = console("resume", "--token", token[1], dsn=dsn)
    assert "2 resumed, 1 refused, 0 left (of 3)" in acted.stdout, acted
    assert "cannot resume: execution # is not paused (it is enqueued)" in acted.stdout
    assert db.execute("SELECT DISTINCT status FROM workflow_executions").fetchall() == [("enqueued",)]
    one_clear_line(console("pause", "--where", "workflow:pay", dsn=dsn), 2, "--dry-run")
    one_clear_line(console("resume", dsn=dsn), 2, "give an execution id")
    assert console("pause", str(ids[1]), dsn=dsn).returncode == 0  # the one-execution form still works


def test_wrong_uses_are_one_clear_line(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    eid = app.enqueue("pay", None)
    one_clear_line(console("cancel", "--where", "workflow:pay", dsn=dsn), 2, "--dry-run", "--token")
    one_clear_line(console("cancel", str(eid), "--token", "b1-x", dsn=dsn), 2, "not both")
    one_clear_line(console("cancel", dsn=dsn), 2, "give an execution id")
    one_clear_line(console("cancel", "--dry-run", dsn=dsn), 2, "--where")
    one_clear_line(console("cancel", "--where", "status:nope", "--dry-run", dsn=dsn), 2, "unknown status 'nope'")
    one_clear_line(console("cancel", "--where", "", "--dry-run", dsn=dsn), 2, "empty")
    one_clear_line(console("cancel", str(eid), "--rate", "5", dsn=dsn), 2, "--rate")
    one_clear_line(console("fork", "--where", "id:1", "--dry-run", dsn=dsn), 2, "--from-step")
    one_clear_line(console("cancel", "--where", "workflow:pya", "--dry-run", dsn=dsn), 1, "did you mean pay")
    one_clear_line(console("cancel", "--token", "b7-0123456789ab", dsn=dsn), 1, "unknown bulk token")
    one_clear_line(console("bulk", "status", "b7-0123456789ab", dsn=dsn), 1, "unknown bulk token")
    nothing = console("cancel", "--where", "status:error", "--dry-run", dsn=dsn)
    assert nothing.returncode == 0 and "nothing to cancel" in nothing.stdout, nothing
    token = json.loads(console("cancel", "--where", f"id:{eid}", "--dry-run", "-f", "json", dsn=dsn).stdout)["token"]
    one_clear_line(console("requeue", "--token", token, dsn=dsn), 1, "previewed for cancel, not requeue")
    db.execute("UPDATE bulk_batches SET expires_at = now() - interval '1 minute'")
    one_clear_line(console("cancel", "--token", token, dsn=dsn), 1, "expired", "preview again")
    assert db.execute("SELECT status FROM workflow_executions").fetchall() == [("enqueued",)]
    assert db.execute("SELECT action FROM operator_actions").fetchall() == [("bulk",)]
