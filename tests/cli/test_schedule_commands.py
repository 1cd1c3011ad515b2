"""``kestrel-console schedule add/list/pause/resume/remove`` and schedules in ``status``, run
as the command line: bad cron or timezone is bad usage (exit 2) and writes nothing;
refusals exit 1; every change is audited as the operator."""

from __future__ import annotations

import json
import subprocess

import psycopg
import pytest

from tests.cli.script import console


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return console(*args, dsn=dsn)


def nothing_written(db: psycopg.Connection) -> bool:
    return db.execute(
        "SELECT (SELECT count(*) FROM schedules) + (SELECT count(*) FROM operator_actions)"
    ).fetchone() == (0,)


@pytest.mark.parametrize(
    "args, hint, message",
    [
        (["nightly", "0 25 * * *", "report"], "CRON", "invalid cron expression '0 25 * * *'"),
        (["nightly", "every day", "report"], "CRON", "invalid cron expression 'every day'"),
        (["nightly", "0 0 31 2 *", "report"], "CRON", "cron expression '0 0 31 2 *' never fires"),
        (
            ["nightly", "0 2 * * *", "report", "--timezone", "Mars/Olympus"],
            "--timezone",
            "unknown timezone 'Mars/Olympus'",
        ),
        (["nightly", "0 2 * * *", "report", "--input", "[1, 2]"], "--input", "must be a JSON object"),
        (["nightly", "0 2 * * *", "report", "--input", "{bad"], "--input", "not valid JSON"),
        (["night ly", "0 2 * * *", "report"], "NAME", "invalid schedule name"),
    ],
)
def test_bad_usage_exits_2_and_writes_nothing(dsn: str, db, args, hint, message) -> None:
    result = cli(dsn, "schedule", "add", *args)
    assert result.returncode == 2, result.stderr
    flat = " ".join(result.stderr.replace("│", " ").split())
    assert f"Invalid value for {hint}" in flat and message in flat
    assert nothing_written(db)


def test_add_of_a_workflow_no_worker_registered_warns_with_the_closest_names(dsn: str, db) -> None:
    db.execute("INSERT INTO workers (worker_id, workflows) VALUES ('w1', ARRAY['nightly-report'])")
    known = cli(dsn, "schedule", "add", "a", "0 2 * * *", "nightly-report")
    assert known.returncode == 0 and known.stderr == "", known.stderr
    typo = cli(dsn, "schedule", "add", "b", "0 2 * * *", "nightly-reprot")
    assert typo.returncode == 0, typo.stderr
    assert (
        "warning: no worker has registered workflow 'nightly-reprot' and it has no executions"
        " (did you mean nightly-report?)"
    ) in typo.stderr
    assert db.execute("SELECT name, workflow_name FROM schedules ORDER BY 1").fetchall() == [
        ("a", "nightly-report"),
        ("b", "nightly-reprot"),
    ]


def test_add_list_pause_resume_remove(dsn: str, db) -> None:
    added = cli(
        dsn,
        "schedule",
        "add",
        "nightly",
        "0 2 * * *",
        "report",
        "--input",
        '{"region": "eu"}',
        "--timezone",
        "Europe/Paris",
        "--catch-up",
        "--operator",
        "alice",
    )
    assert added.returncode == 0, added.stderr
    assert "added schedule 'nightly'" in added.stdout and "first tick" in added.stdout
    assert "warning: no worker has registered workflow 'report'" in added.stderr
    row = db.execute(
        "SELECT cron, timezone, workflow_name, input, catch_up, paused, source, created_by,"
        " extract(hour FROM next_tick AT TIME ZONE 'Europe/Paris') FROM schedules"
    ).fetchone()
    assert row == ("0 2 * * *", "Europe/Paris", "report", {"region": "eu"}, True, False, "cli", "alice", 2)

    taken = cli(dsn, "schedule", "add", "nightly", "*/5 * * * *", "other")
    assert taken.returncode == 1 and "a schedule with that name exists" in taken.stderr

    assert cli(dsn, "schedule", "pause", "nightly", "--operator", "bob", "--comment", "freeze").returncode == 0
    again = cli(dsn, "schedule", "pause", "nightly", "--operator", "bob")
    assert again.returncode == 1 and 'schedule "nightly" is already paused (by bob' in again.stderr

    listed = json.loads(cli(dsn, "schedule", "list", "--format", "json").stdout)
    assert [(r["name"], r["paused"], r["paused_by"], r["workflow_name"]) for r in listed] == [
        ("nightly", True, "bob", "report")
    ]
    table = cli(dsn, "schedule", "list").stdout
    assert "nightly" in table and "paused by bob" in table
    status = cli(dsn, "status")
    assert status.returncode == 0
    assert "paused schedule: 'nightly'" in status.stdout and "schedule resume nightly" in status.stdout

    triggered = cli(dsn, "schedule", "trigger", "nightly", "--operator", "erin", "--comment", "once more")
    assert triggered.returncode == 0, triggered.stderr
    eid = int(triggered.stdout.rsplit("execution ", 1)[1])
    assert triggered.stdout.startswith("triggered schedule 'nightly' as erin: execution ")
    assert db.execute("SELECT workflow_name, input->>'region', input->>'schedule' FROM workflow_executions"
                      " WHERE id = %s", (eid,)).fetchone() == ("report", "eu", "nightly")  # fmt: skip
    unknown = cli(dsn, "schedule", "trigger", "nope")
    assert unknown.returncode == 1 and 'cannot trigger: no schedule named "nope"' in unknown.stderr

    resumed = cli(dsn, "schedule", "resume", "nightly", "--operator", "carol")
    assert resumed.returncode == 0 and "next tick" in resumed.stdout
    assert "paused schedule" not in cli(dsn, "status").stdout
    assert cli(dsn, "schedule", "remove", "nightly", "--operator", "dave").returncode == 0
    gone = cli(dsn, "schedule", "remove", "nightly")
    assert gone.returncode == 1 and 'no schedule named "nightly"' in gone.stderr
    assert db.execute("SELECT actor, action, comment FROM operator_actions ORDER BY id").fetchall() == [
        ("alice", "add_schedule", None),
        ("bob", "pause_schedule", "freeze"),
        ("erin", "trigger_schedule", "once more"),
        ("carol", "resume_schedule", None),
        ("dave", "remove_schedule", None),
    ]
    assert db.execute("SELECT count(*) FROM schedules").fetchone() == (0,)


def test_resuming_a_schedule_whose_row_was_edited_into_nonsense_is_refused(dsn: str, db) -> None:
    # Only an admin's hand-written UPDATE gets such a row in; resume was a croniter traceback.
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source, paused, paused_by) "
        "VALUES ('hand', 'not a cron', 'report', now(), 'cli', true, 'eve')"
    )
    done = cli(dsn, "schedule", "resume", "hand")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: schedule 'hand' cannot resume: invalid cron expression 'not a cron'")
    assert done.stderr.count("\n") == 1, done.stderr
    assert db.execute("SELECT paused FROM schedules WHERE name = 'hand'").fetchone() == (True,)
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)
