"""``enqueue`` of a workflow no live worker runs warns on stderr as ``schedule add`` does
(issue 20): it was silent, exit 0, and a typo waited in the queue for ever."""

from __future__ import annotations

from tests.cli.script import console

LIVE_WORKER = (
    "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, started_at, last_heartbeat) "
    "VALUES ('w-1', 'h', 1, ARRAY['remediate'], 2, now(), now())"
)


def enqueue(dsn: str, name: str):
    return console("enqueue", name, dsn=dsn)


def test_enqueue_warns_when_no_live_worker_runs_the_workflow(dsn, db):
    db.execute(LIVE_WORKER)
    done = enqueue(dsn, "remediat")
    assert done.returncode == 0
    eid = int(done.stdout.strip())
    assert db.execute("SELECT workflow_name, status FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (
        "remediat",
        "enqueued",
    )
    assert done.stderr.strip() == (
        f"warning: no live worker has registered workflow 'remediat' (did you mean "
        f"remediate?); execution {eid} waits in the queue until a worker with its "
        "code starts"
    )

    served = enqueue(dsn, "remediate")
    assert served.returncode == 0 and served.stderr == ""
