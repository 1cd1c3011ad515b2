"""Text from the database never reaches the terminal raw: control characters are shown as
escapes by every CLI output (issue 9)."""

from __future__ import annotations

import json
import os
import pty
import subprocess

import psycopg

from tests.cli.script import SCRIPT, console, read_terminal
from tests.hostile_text import (
    ESC_INPUT,
    ESC_NAME,
    ESC_OPERATOR,
    ESC_QUEUE,
    has_raw_control,
    hostile_execution,
    hostile_paused_things,
)


def test_list_show_status_and_sql_tables_show_escapes_not_controls(
    dsn: str, reader_dsn: str, db: psycopg.Connection
) -> None:
    eid = hostile_execution(db)
    outputs = {
        "list": console("list", dsn=dsn),
        "show": console("show", str(eid), dsn=dsn),
        "status": console("status", dsn=dsn),
        "sql": console(
            "--reader-dsn",
            reader_dsn,
            "sql",
            "SELECT workflow_name, input, error, E'\\x1b[31m' AS \"col\x1b[1m\" FROM workflow_executions",
            dsn=dsn,
        ),
        "report": console("report", "errors-this-month", dsn=dsn),
    }
    for name, done in outputs.items():
        assert done.returncode == 0, (name, done.stderr)
        assert not has_raw_control(done.stdout + done.stderr), (name, repr(done.stdout))
    assert "pay\\x1b[2J\\x1b[31mroll" in outputs["list"].stdout
    show = outputs["show"].stdout
    assert "pay\\x1b[2J\\x1b[31mroll" in show and "rca\\x1b[1A" in show and "boom\\x1b[8m hidden" in show
    assert "eve\\x1b[31m" in show  # the approver's name, in the timeline
    assert "\\x1b" in outputs["sql"].stdout and "col\\x1b[1m" in outputs["sql"].stdout


def test_json_escapes_controls_and_keeps_the_values(dsn: str, reader_dsn: str, db: psycopg.Connection) -> None:
    eid = hostile_execution(db)
    for args in (
        ("show", str(eid), "--format", "json"),
        ("list", "--format", "json"),
        ("--reader-dsn", reader_dsn, "sql", "SELECT workflow_name, input FROM workflow_executions", "--format", "json"),
    ):
        done = console(*args, dsn=dsn)
        assert done.returncode == 0, done.stderr
        assert not has_raw_control(done.stdout), (args, repr(done.stdout))
        doc = json.loads(done.stdout)
        assert doc[0]["workflow_name"] == ESC_NAME  # the value itself is exact
    shown = json.loads(console("show", str(eid), "--format", "json", dsn=dsn).stdout)[0]
    assert shown["input"] == ESC_INPUT
    # CSV is data (redirected to files): exact when stdout is not a terminal.
    done = console(
        "--reader-dsn", reader_dsn, "sql", "SELECT workflow_name FROM workflow_executions", "--format", "csv", dsn=dsn
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == ESC_NAME


def test_error_messages_quoting_database_text_are_escaped(dsn: str, db: psycopg.Connection) -> None:
    eid = hostile_execution(db)
    done = console("approve", str(eid), "gate\x1b[2J", "--operator", "x", dsn=dsn)
    assert done.returncode == 1
    assert "gate\\x1b[2J" in done.stderr and not has_raw_control(done.stderr)


def test_status_notes_prune_queues_and_schedules_show_escapes(dsn: str, db: psycopg.Connection) -> None:
    # The sentences around the tables quote database text too: a paused queue's pauser and
    # name, a paused schedule's workflow and cron, prune's per-workflow preview.
    hostile_paused_things(db)
    outputs = {
        "status": console("status", dsn=dsn),
        "prune": console("prune", "--older-than", "30d", "--dry-run", dsn=dsn),
        "queue list": console("queue", "list", dsn=dsn),
        "schedule list": console("schedule", "list", dsn=dsn),
        "queue resume": console("queue", "resume", ESC_QUEUE, "--operator", ESC_OPERATOR, dsn=dsn),
    }
    for name, done in outputs.items():
        assert done.returncode == 0, (name, done.stderr)
        assert not has_raw_control(done.stdout + done.stderr), (name, repr(done.stdout + done.stderr))
    status = outputs["status"].stdout
    assert "paused (by mallory\\x1b[32m)" in status and "queue resume mail\\x1b[31m" in status
    assert "'0 3 * * *\\x1b[1m'" in status and "schedule resume nightly\\x1b]0;t\\x07" in status
    assert "pay\\x1b[2J\\x1b[31mroll" in outputs["prune"].stdout
    assert "as mallory\\x1b[32m" in outputs["queue resume"].stdout


def test_csv_on_a_terminal_is_escaped(dsn: str, db: psycopg.Connection) -> None:
    # CSV is exact when piped (above); printed on a terminal it is escaped like a table.
    hostile_execution(db)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [str(SCRIPT), "--dsn", dsn, "list", "--format", "csv"],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "COLUMNS": "200"},
        )
        os.close(slave)
        said = read_terminal(master)
        assert proc.wait(timeout=60) == 0, said
    finally:
        os.close(master)
    text = said.decode().replace("\r\n", "\n")
    assert "pay\\x1b[2J\\x1b[31mroll" in text and not has_raw_control(text), repr(text)
