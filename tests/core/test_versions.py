"""Workflow versions: an execution records the version it started under and is claimed only by
a worker that has that version; executions enqueued without the code run on any version and
are stamped by their first claim."""

from __future__ import annotations

import psycopg

from kestrel_core import Kestrel
from kestrel_core.workflow.versions import fingerprint
from tests.waiting import wait_for
from tests.worker_processes import start_worker_process, stop_worker_processes


def versioned_app(dsn: str, version: str) -> Kestrel:
    app = Kestrel(dsn)

    @app.workflow("report", version=version)
    def report(ctx, input):
        return {"ran_under": version}

    return app


def row(db: psycopg.Connection, eid: int) -> tuple:
    return db.execute(
        "SELECT status, version, owner_id, output FROM workflow_executions WHERE id = %s", (eid,)
    ).fetchone()


def test_execution_started_under_a_waits_for_a_worker_with_a(dsn: str, db: psycopg.Connection, start_worker) -> None:
    with versioned_app(dsn, "A") as app_a, versioned_app(dsn, "B") as app_b, Kestrel(dsn) as no_code:
        old = app_a.enqueue("report", 1)  # recorded: version A
        new = app_b.enqueue("report", 2)  # recorded: version B
        anyv = no_code.enqueue("report", 3)  # no code here: any version
        assert row(db, old)[:2] == ("enqueued", "A") and row(db, anyv)[1] is None

        start_worker(app_b, worker_id="worker-b")
        wait_for(
            lambda: row(db, new)[0] == "success" and row(db, anyv)[0] == "success",
            what="the B worker to run B and unversioned executions",
        )
        assert row(db, anyv)[1:] == ("B", "worker-b", {"ran_under": "B"})  # stamped by its first claim
        assert row(db, old)[0] == "enqueued", "a B worker must not run an execution started under A"

        start_worker(app_a, worker_id="worker-a")
        wait_for(lambda: row(db, old)[0] == "success", what="an A worker to drain the A execution")
        assert row(db, old)[1:] == ("A", "worker-a", {"ran_under": "A"})
    registered = dict(db.execute("SELECT worker_id, versions FROM workers").fetchall())
    assert registered == {"worker-a": ["A"], "worker-b": ["B"]}


def test_the_same_across_worker_processes(dsn: str, db: psycopg.Connection) -> None:
    """As above with real worker processes: a B process runs B work enqueued after the A
    execution (so it has claimed past it) but never the A execution, which an A process,
    started later, then runs."""

    def worker(version: str):
        return start_worker_process(
            dsn,
            "tests.core.versions_app:app",
            "--worker-id",
            f"proc-{version}",
            "--processes",
            "1",
            "--concurrency",
            "2",
            "--log-level",
            "warning",
            env={"VERSIONS_APP_VERSION": version},
        )

    procs = []
    try:
        with versioned_app(dsn, "A") as app_a, versioned_app(dsn, "B") as app_b:
            old = app_a.enqueue("report", 1)
            procs.append(worker("B"))
            news = [app_b.enqueue("report", i) for i in range(2, 6)]
            wait_for(
                lambda: all(row(db, eid)[0] == "success" for eid in news) or procs[0].poll() is not None,
                timeout=30,
                what="the B process to run the B executions",
            )
            assert procs[0].poll() is None, procs[0].stdout.read()
            assert row(db, old)[:3] == ("enqueued", "A", None), "a B worker must not claim an A execution"
            procs.append(worker("A"))
            wait_for(
                lambda: row(db, old)[0] == "success" or procs[1].poll() is not None,
                timeout=30,
                what="the A process to run the A execution",
            )
            assert row(db, old)[1:] == ("A", "proc-A", {"ran_under": "A"})
            assert {row(db, eid)[2] for eid in news} == {"proc-B"}
    finally:
        stop_worker_processes(procs)


def test_default_version_is_a_fingerprint_of_the_source(dsn: str) -> None:
    def one(ctx, input):
        return 1

    def two(ctx, input):
        return 2

    app = Kestrel(dsn)
    app.workflow("one")(one)
    app.workflow("two")(two)
    app.workflow("named", version="2024-05")(one)
    versions = {name: wf.version for name, wf in app.workflows.items()}
    assert versions["one"] == fingerprint(one) and len(versions["one"]) == 12
    assert versions["one"] != versions["two"]
    assert versions["named"] == "2024-05"


def test_readme_versions_example_as_written(dsn: str, monkeypatch, capsys) -> None:
    from tests.readme_blocks import blocks

    (example,) = blocks("Versions", "python", doc="docs/flow-control.md")
    monkeypatch.setenv("KESTREL_DSN", dsn)
    exec(compile(example, "docs/flow-control.md (Versions)", "exec"), {"__name__": "readme_versions"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["enqueued", "{'customer': 'acme', 'ran_under': '1'}"]
