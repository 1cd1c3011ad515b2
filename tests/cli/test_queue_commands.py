"""`kestrel-console queue list|pause|resume`, run as the command line: formats parsed back,
the audit rows, exit codes and messages of refusals; `status` naming executions no live
worker can run; and the README's Queues example, as written."""

from __future__ import annotations

import csv
import io
import json
import shlex
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from kestrel_console.cli.queue_commands import QUEUE_COLUMNS
from kestrel_console.cli.supervision import default_processes
from kestrel_core import Kestrel
from kestrel_core.dispatch.queues import declare
from tests.cli.script import SCRIPT, console, environment
from tests.readme_blocks import blocks, commands
from tests.waiting import wait_for

LIVE_WORKERS = "SELECT count(*) FROM workers WHERE stopped_at IS NULL"


@pytest.fixture
def cli(dsn: str):
    """``kestrel-console ARGS`` with ``$KESTREL_DSN`` set, as the README's examples run."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return console(*args, env={"KESTREL_DSN": dsn}, cwd=cwd)

    run.env = environment({"KESTREL_DSN": dsn})  # for the worker, a real process
    return run


def declared(dsn: str) -> None:
    """Queues as a worker's start would declare them, and some work in them."""
    app = Kestrel(dsn)
    app.queue("emails", concurrency=3, rate=(10, timedelta(seconds=30)))
    app.queue("bulk", per_worker=2, priority=-1)
    app.workflow("send", queue="emails")(lambda ctx, _: None)
    with app.connection() as conn:
        declare(conn, app.schema, list(app.queues.values()), {"emails": ["send"]})
    app.enqueue("send", 1)
    app.enqueue("send", 2)
    app.close()


def test_queue_list_in_every_format(cli, dsn: str) -> None:
    empty = cli("queue", "list")
    assert empty.returncode == 0 and "no queues yet" in empty.stdout
    declared(dsn)
    rows = {r["name"]: r for r in json.loads(cli("queue", "list", "--format", "json").stdout)}
    assert set(rows) == {"emails", "bulk"}
    assert set(rows["emails"]) == set(QUEUE_COLUMNS)
    assert (
        rows["emails"]["concurrency"],
        rows["emails"]["rate_limit"],
        rows["emails"]["rate_period_s"],
        rows["emails"]["enqueued"],
        rows["emails"]["paused"],
    ) == (3, 10, 30.0, 2, False)
    assert (rows["bulk"]["per_worker"], rows["bulk"]["priority"], rows["bulk"]["concurrency"]) == (2, -1, None)
    out = cli("queue", "list", "--format", "csv").stdout
    reader = csv.DictReader(io.StringIO(out))
    assert reader.fieldnames == QUEUE_COLUMNS and {r["name"] for r in reader} == {"emails", "bulk"}
    table = cli("queue", "list").stdout
    assert "emails" in table and "0/3" in table and "0/10 per 30 s" in table


def test_pause_and_resume_are_audited_and_refused_when_pointless(cli, dsn: str, db: psycopg.Connection) -> None:
    declared(dsn)
    paused = cli("queue", "pause", "emails", "--comment", "provider outage", "--operator", "alice")
    assert paused.returncode == 0, paused.stderr
    assert "paused queue 'emails' as alice" in paused.stdout
    again = cli("queue", "pause", "emails", "--operator", "bob")
    assert again.returncode == 1 and 'queue "emails" is already paused (by alice)' in again.stderr
    listed = {r["name"]: r for r in json.loads(cli("queue", "list", "--format", "json").stdout)}
    assert listed["emails"]["paused"] is True and listed["emails"]["paused_by"] == "alice"
    status = cli("status")
    assert "queue 'emails' is paused (by alice) with 2 enqueued" in status.stdout
    resumed = cli("queue", "resume", "emails", "--operator", "alice")
    assert resumed.returncode == 0 and "resumed queue 'emails' as alice" in resumed.stdout
    missing = cli("queue", "resume", "nope")
    assert missing.returncode == 1 and 'no queue named "nope"' in missing.stderr
    assert "kestrel-console queue list" in missing.stderr
    assert db.execute(
        "SELECT actor, action, comment, details->>'queue' FROM operator_actions ORDER BY id"
    ).fetchall() == [("alice", "pause_queue", "provider outage", "emails"), ("alice", "resume_queue", None, "emails")]
    usage = cli("queue", "pause")
    assert usage.returncode == 2


def test_status_names_executions_no_live_worker_can_run(cli, dsn: str, db: psycopg.Connection) -> None:
    old = Kestrel(dsn)
    old.workflow("export", version="1")(lambda ctx, _: None)
    new = Kestrel(dsn)
    new.workflow("export", version="2")(lambda ctx, _: None)
    eid = old.enqueue("export", {})
    with new.worker(worker_id="new-worker"):
        status = cli("status")
        assert "cannot run: 1 enqueued 'export' needs version 1, live workers have 2" in status.stdout
        rows = json.loads(cli("status", "--format", "json").stdout)
        assert [(r["workflow_name"], r["cannot_run"]) for r in rows] == [("export", 1)]
        shown = json.loads(cli("show", str(eid), "--format", "json").stdout)[0]
        assert shown["blocker"].startswith("it needs version 1 of 'export', live workers have 2")
    old.close()
    new.close()


def test_readme_queues_example_as_written(cli, dsn: str, db: psycopg.Connection, tmp_path: Path) -> None:
    (app_code,) = blocks("Queues", "python", doc="docs/flow-control.md")
    (shell,) = blocks("Queues", "bash", doc="docs/flow-control.md")
    (tmp_path / "mail_app.py").write_text(app_code)
    lines = [shlex.split(line) for line in commands(shell)]
    assert lines[0][:2] == ["kestrel-console", "worker"]
    worker = subprocess.Popen(
        [str(SCRIPT), *lines[0][1:]],
        cwd=tmp_path,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(
            lambda: (
                db.execute("SELECT count(*) FROM queues WHERE name IN ('emails', 'exports')").fetchone()[0] == 2
                or worker.poll() is not None
            ),
            timeout=90,  # a supervisor and a process per core start, each importing: slow on a loaded box
            what="the worker to declare its queues",
        )
        # Every process of the supervisor started, so the Ctrl-C below does not reach one still
        # importing (it would die of KeyboardInterrupt and the supervisor exit 130).
        wait_for(
            lambda: db.execute(LIVE_WORKERS).fetchone()[0] == default_processes() or worker.poll() is not None,
            timeout=90,
            what="every worker process to register",
        )
        assert worker.poll() is None
        outputs = []
        for argv in lines[1:]:
            assert argv[0] == "kestrel-console"
            done = cli(*argv[1:], cwd=tmp_path)
            assert done.returncode == 0, (argv, done.stderr)
            outputs.append(done.stdout)
        eid = int(outputs[0])
        wait_for(
            lambda: (
                db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone()[0] == "success"
            ),
            timeout=30,
            what="the export to run",
        )
        row = db.execute(
            "SELECT queue, concurrency_key, version, output FROM workflow_executions WHERE id = %s", (eid,)
        ).fetchone()
        assert row == ("exports", "acme", "2", "export of acme")
        assert "emails" in outputs[1] and "exports" in outputs[1]
        limits = db.execute(
            "SELECT name, concurrency, per_worker, rate_limit, per_key, priority, paused FROM queues ORDER BY name"
        ).fetchall()
        assert limits == [("emails", 20, 4, 100, 1, 5, False), ("exports", 2, None, None, 1, 0, False)]
        assert [r[0] for r in db.execute("SELECT action FROM operator_actions ORDER BY id")] == [
            "pause_queue",
            "resume_queue",
        ]
        registered = db.execute("SELECT queues FROM workers").fetchone()[0]
        assert registered == ["emails", "exports"]
    finally:
        worker.send_signal(signal.SIGINT)
        log = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0, log
