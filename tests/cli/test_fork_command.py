"""`kestrel-console fork` (issue 47): prints the new id, `show` names the link both ways, and a
refusal is one line with exit 1, a bad --input bad usage with exit 2, both changing nothing."""

from __future__ import annotations

import json

import psycopg

from kestrel_core import Kestrel
from tests.cli.script import console, one_clear_line


def finished_origin(app: Kestrel, db: psycopg.Connection) -> int:
    """An execution that ran steps a, b and c (written as a worker would: checkpoints with
    their positions), finished."""
    eid = app.enqueue("three", {"n": 1})
    for seq, step in enumerate("abc", start=1):
        db.execute(
            "INSERT INTO operation_outputs (execution_id, step_id, output, seq) VALUES (%s, %s, %s, %s)",
            (eid, step, json.dumps(step), seq),
        )
    db.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() WHERE id = %s", (eid,))
    return eid


def test_fork_prints_the_new_id_and_show_links_both_ways(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    origin = finished_origin(app, db)
    done = console("fork", str(origin), "--from-step", "b", "--input", '{"n": 2}', "--operator", "alice", dsn=dsn)
    assert done.returncode == 0, done.stderr
    fork = int(done.stdout)
    assert db.execute("SELECT status, input FROM workflow_executions WHERE id = %s", (fork,)).fetchone() == (
        "enqueued",
        {"n": 2},
    )
    assert db.execute(
        "SELECT step_id FROM operation_outputs WHERE execution_id = %s ORDER BY seq", (fork,)
    ).fetchall() == [("a",)]
    shown = console("show", str(fork), dsn=dsn, env={"COLUMNS": "200"})
    assert f"forked from #{origin} at step b" in shown.stdout, shown.stdout
    shown = console("show", str(origin), "--format", "json", dsn=dsn)
    assert json.loads(shown.stdout)[0]["forks"] == [{"id": fork, "step": "b"}]


def test_fork_refusals_are_one_line_and_change_nothing(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    origin = finished_origin(app, db)
    one_clear_line(console("fork", str(origin), "--from-step", "zz", dsn=dsn), 1, "has no step 'zz'")
    one_clear_line(console("fork", str(origin), "--from-step", "a", "--version", "v7", dsn=dsn), 1, "no live worker")
    one_clear_line(console("fork", str(origin), "--from-step", "a", "--input", "{nope", dsn=dsn), 2, "--input")
    one_clear_line(console("fork", str(origin), dsn=dsn), 2, "--from-step")
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)
