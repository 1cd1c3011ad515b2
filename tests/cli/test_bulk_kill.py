"""Bulk cancel of 2,000 executions by filter while a worker runs them (issue 47): the rows acted
on are exactly the rows previewed (not the filter evaluated again: rows enqueued after the
preview match it and are left alone), each previewed row ends cancelled by the batch or is
reported refused with its reason (those the worker finished meanwhile), none is lost or done
twice, and a console killed with SIGKILL in the middle of the batch is resumed by running the
same command again."""

from __future__ import annotations

import json
import signal
import subprocess as sp
from typing import Any

import psycopg

from kestrel_core import Kestrel
from tests.cli.script import SCRIPT, console, environment
from tests.waiting import wait_for
from tests.worker_processes import start_worker_process, stop_worker_processes

N = 2_000
FILTER = "workflow:=bulk-slow"


def _statuses(db: psycopg.Connection, ids: list[int]) -> dict[int, str]:
    rows = db.execute("SELECT id, status FROM workflow_executions WHERE id = ANY(%s)", (ids,)).fetchall()
    return dict(rows)


def _consoles_gone(db: psycopg.Connection) -> bool:
    """No session of a console is left on the server (the killed one's transaction has ended)."""
    row = db.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE application_name = 'kestrel-console' AND datname = current_database()"
    ).fetchone()
    return row == (0,)


def test_a_console_killed_mid_batch_resumes_it_and_acts_on_exactly_the_previewed_rows(
    app: Kestrel, dsn: str, db: psycopg.Connection
) -> None:
    ids = app.enqueue_many("bulk-slow", [{"n": i} for i in range(N)])
    others = app.enqueue_many("bulk-other", [{"n": i} for i in range(20)])
    worker = start_worker_process(dsn, "tests.cli.bulk_app:app", "--processes", "1", "--concurrency", "4")
    try:
        wait_for(lambda: "success" in _statuses(db, ids[:50]).values(), timeout=60, what="the worker to finish some")

        shown = console("cancel", "--where", FILTER, "--dry-run", "--format", "json", dsn=dsn)
        assert shown.returncode == 0, shown.stderr
        preview: dict[str, Any] = json.loads(shown.stdout)
        assert preview["total"] == N and sorted(preview["ids"]) == sorted(ids)
        token = preview["token"]
        # Matches the filter, but after the preview: never acted on.
        late = app.enqueue_many("bulk-slow", [{"late": i} for i in range(30)])
        # Rows keep changing state under the preview: some finish before the batch reaches them.
        finished_before = sum(s == "success" for s in _statuses(db, ids).values())
        wait_for(
            lambda: sum(s == "success" for s in _statuses(db, ids).values()) > finished_before,
            timeout=60,
            what="more rows to finish after the preview",
        )

        # No --rate: the next chunk starts at once, so the kill lands while one is in flight.
        command = [str(SCRIPT), "--dsn", dsn, "cancel", "--token", token, "--comment", "incident 9"]
        first = sp.Popen(command, env=environment(), stdout=sp.PIPE, stderr=sp.PIPE, text=True)
        try:
            assert first.stderr is not None
            line = first.stderr.readline()  # the first chunk is committed: kill it in the middle
            assert f"cancel {token}:" in line, line + first.stderr.read()
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == -signal.SIGKILL
        wait_for(lambda: _consoles_gone(db), timeout=30, what="the killed console's session to end")

        batch_id, acted, left = db.execute(
            "SELECT b.id, count(i.outcome), count(*) FILTER (WHERE i.outcome IS NULL)"
            "  FROM bulk_batches b JOIN bulk_batch_items i ON i.batch_id = b.id WHERE b.token = %s GROUP BY b.id",
            (token,),
        ).fetchone()
        assert 0 < acted < N and left == N - acted, (acted, left)
        # Nothing the killed run did is half-recorded: an audited cancel has its outcome, and the
        # other way round.
        assert db.execute(
            "SELECT count(*) FROM operator_actions a"
            "  LEFT JOIN bulk_batch_items i ON i.batch_id = a.batch_id AND i.execution_id = a.execution_id"
            " WHERE a.batch_id = %s AND i.outcome IS DISTINCT FROM 'done'",
            (batch_id,),
        ).fetchone() == (0,)

        resumed = sp.run([*command, "--rate", "1000"], env=environment(), capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        stop_worker_processes([worker])

    summary = resumed.stdout.splitlines()[0]
    outcomes = dict(
        db.execute("SELECT execution_id, outcome FROM bulk_batch_items WHERE batch_id = %s", (batch_id,)).fetchall()
    )
    # The acted set is the previewed set: every previewed id, no other.
    assert sorted(outcomes) == sorted(preview["ids"])
    assert None not in outcomes.values()
    done = [i for i, o in outcomes.items() if o == "done"]
    refused = [i for i, o in outcomes.items() if o == "refused"]
    assert done and refused, (len(done), len(refused))
    assert f"{len(done):,} cancelled, {len(refused):,} refused, 0 left (of {N:,})" in summary, resumed.stdout
    assert "already finished (success)" in resumed.stdout
    statuses = _statuses(db, ids)
    assert {statuses[i] for i in done} == {"cancelled"}
    # Refused: each with its reason, and it is the row's own state that refused it.
    reasons = dict(
        db.execute(
            "SELECT execution_id, reason FROM bulk_batch_items WHERE batch_id = %s AND outcome = 'refused'",
            (batch_id,),
        ).fetchall()
    )
    assert {statuses[i] for i in refused} == {"success"}  # the worker finished them first
    for i in refused:
        assert reasons[i] == f"cannot cancel: execution {i} already finished ({statuses[i]})"
    # Each done row audited once, with the batch's id and the comment; nothing else in the batch.
    audited = db.execute(
        "SELECT execution_id, count(*), min(comment) FROM operator_actions"
        " WHERE batch_id = %s AND action = 'cancel' GROUP BY execution_id",
        (batch_id,),
    ).fetchall()
    assert sorted(r[0] for r in audited) == sorted(done)
    assert {(r[1], r[2]) for r in audited} == {(1, "incident 9")}
    assert db.execute("SELECT count(*) FROM operator_actions WHERE batch_id <> %s", (batch_id,)).fetchone() == (0,)
    # Rows outside the preview: never acted on, though the late ones match the filter.
    untouched = _statuses(db, late + others)
    assert "cancelled" not in untouched.values(), untouched
    assert db.execute(
        "SELECT count(*) FROM operator_actions WHERE execution_id = ANY(%s)", (late + others,)
    ).fetchone() == (0,)
    # The token is used up now.
    again = console("cancel", "--token", token, dsn=dsn)
    assert again.returncode == 1 and "already used" in again.stderr, again.stderr
