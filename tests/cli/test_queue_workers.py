"""``queue list`` and the Queues screen count only the live workers that can run the queue's
workflows (issue 20): a worker that claims from every queue but registered none of the
workflows bound to one was counted as serving it."""

from __future__ import annotations

import json

from tests.cli.script import console

WORKER = (
    "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, started_at, last_heartbeat, "
    "queues) VALUES (%s, 'h', 1, %s, 2, now(), now(), %s)"
)


def test_queue_list_counts_the_workers_that_can_run_its_workflows(dsn, db):
    db.execute("INSERT INTO queues (name, workflows) VALUES ('emails', ARRAY['send']), ('bulk', ARRAY['import'])")
    db.execute(WORKER, ("w-other", ["report"], None))  # every queue, none of their workflows
    db.execute(WORKER, ("w-send", ["send"], None))  # every queue, runs send
    db.execute(WORKER, ("w-elsewhere", ["import"], ["emails"]))  # claims only from emails, runs import
    done = console("queue", "list", "--format", "json", dsn=dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    counts = {q["name"]: q["live_workers"] for q in json.loads(done.stdout)}
    assert counts["emails"] == 1 and counts["bulk"] == 0, counts
