"""The engine's commands: migrate, enqueue, approve/reject, requeue/cancel, worker.

In process (tests/cli/script.py), and a real process for the README example's worker.
"""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import psycopg
import pytest

from kestrel_console.cli.supervision import default_processes
from tests.cli.script import console, started
from tests.waiting import wait_for


def run(dsn: str, *args: str):
    return console("--operator", "alice", *args, dsn=dsn)


def test_migrate_reports_what_it_did(database: str) -> None:
    first = run(database, "--schema", "cli_mig", "migrate")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "applied migration(s) 1, 2" in first.stdout
    again = run(database, "--schema", "cli_mig", "migrate")
    assert again.returncode == 0 and "already up to date" in again.stdout


def test_enqueue_prints_the_id(dsn: str, db: psycopg.Connection) -> None:
    result = run(dsn, "enqueue", "remediate", "--input", '{"pod": "api-1"}')
    assert result.returncode == 0, result.stdout + result.stderr
    eid = int(result.stdout.strip())
    assert db.execute("SELECT workflow_name, input FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (
        "remediate",
        {"pod": "api-1"},
    )
    again = run(dsn, "enqueue", "remediate", "--idempotency-key", "k1")
    same = run(dsn, "enqueue", "remediate", "--idempotency-key", "k1")
    assert again.stdout == same.stdout


def test_enqueue_bad_json_is_usage_error_nothing_inserted(dsn: str, db: psycopg.Connection) -> None:
    result = run(dsn, "enqueue", "remediate", "--input", "{pod: api-1}")
    assert result.returncode == 2
    assert "not valid JSON" in result.stderr
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


@pytest.mark.parametrize(
    "args, message",
    [
        (["approve", "999", "gate"], "cannot approve: no execution with id 999"),
        (["reject", "999", "gate"], "cannot reject: no execution with id 999"),
        (["cancel", "999"], "cannot cancel: no execution with id 999"),
        (["requeue", "999"], "cannot requeue: no execution with id 999"),
    ],
)
def test_actions_on_unknown_ids_exit_1(dsn: str, args: list[str], message: str) -> None:
    result = run(dsn, *args)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_cancel_then_requeue_then_refusals(dsn: str, db: psycopg.Connection) -> None:
    eid = run(dsn, "enqueue", "w").stdout.strip()
    cancelled = run(dsn, "cancel", eid, "--comment", "not needed")
    assert cancelled.returncode == 0 and f"cancelled execution {eid} (was enqueued)" in cancelled.stdout
    twice = run(dsn, "cancel", eid)
    assert twice.returncode == 1 and "already finished (cancelled)" in twice.stderr
    requeued = run(dsn, "requeue", eid)
    assert requeued.returncode == 0 and "(was cancelled)" in requeued.stdout
    refused = run(dsn, "requeue", eid)
    assert refused.returncode == 1 and "is enqueued" in refused.stderr
    audit = db.execute("SELECT actor, action, comment FROM operator_actions ORDER BY id").fetchall()
    assert audit == [("alice", "cancel", "not needed"), ("alice", "requeue", None)]


def test_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    result = console("--dsn", "postgresql://kestrel:s3cret@127.0.0.1:1/nowhere", "enqueue", "w")
    assert result.returncode == 1
    assert "cannot connect to PostgreSQL at kestrel@127.0.0.1:1/nowhere" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_unmigrated_database_tells_to_migrate(database: str) -> None:
    result = run(database, "--schema", "nothing_here", "enqueue", "w")
    assert result.returncode == 1
    assert "run `kestrel-console migrate`" in result.stderr


def test_bad_usage_exits_2(dsn: str) -> None:
    assert run(dsn, "approve", "not-a-number", "gate").returncode == 2
    assert run(dsn, "worker").returncode == 2
    assert console("--schema", "bad-name!", "migrate").returncode == 2


def test_worker_command_errors(dsn: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "emptyapp.py").write_text("from kestrel_core import Kestrel\napp = Kestrel()\nother = 3\n")
    missing = run(dsn, "worker", "no_such_module_here")
    assert missing.returncode == 1 and "cannot import module 'no_such_module_here'" in missing.stderr
    no_attr = run(dsn, "worker", "emptyapp:nope")
    assert no_attr.returncode == 1 and "has no attribute 'nope'" in no_attr.stderr
    wrong = run(dsn, "worker", "emptyapp:other")
    assert wrong.returncode == 1 and "is a int, not a kestrel_core.Kestrel app" in wrong.stderr
    empty = run(dsn, "worker", "emptyapp")
    assert empty.returncode == 1 and "registers no workflow" in empty.stderr


def test_worker_gives_up_on_an_unreachable_database_after_startup_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "oneapp.py").write_text(
        "from kestrel_core import Kestrel\napp = Kestrel()\napp.workflow('noop')(lambda ctx, _: None)\n"
    )
    result = console(
        "--dsn", "postgresql://kestrel:s3cret@127.0.0.1:1/nowhere", "worker", "oneapp", "--startup-timeout", "0.5"
    )
    assert result.returncode == 1
    assert "cannot connect to PostgreSQL at kestrel@127.0.0.1:1/nowhere" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr and "Traceback" not in result.stderr


README_APP = textwrap.dedent("""
    from datetime import timedelta
    from kestrel_core import Kestrel

    app = Kestrel()

    def analyze(alert):
        return {"cause": "memory leak", "pod": alert["pod"]}

    def make_fix(rca):
        return {"patch": f"raise memory limit of {rca['pod']}"}

    def open_pr(fix):
        return "https://git.example.com/infra/pull/42"

    @app.workflow("remediate")
    def remediate(ctx, alert):
        rca = ctx.step("rca", analyze, alert)
        fix = ctx.step("fix", make_fix, rca, retries=3)
        d = ctx.wait_for_approval("approve-fix", timeout=timedelta(days=2), details=fix)
        if not d.approved:
            return {"rejected_by": d.by}
        ctx.sleep("cool-down", timedelta(seconds=1))
        return {"pr": ctx.step("open-pr", open_pr, fix)}
""")


def live_workers(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM kestrel.workers WHERE stopped_at IS NULL").fetchone()[0]


def test_readme_worked_example_end_to_end(dsn: str, tmp_path: Path) -> None:
    """Terminal 1 runs `kestrel-console worker remediate_app`; terminal 2 enqueues and approves."""
    (tmp_path / "remediate_app.py").write_text(README_APP)
    env = {"KESTREL_DSN": dsn, "USER": "not-alice"}
    # terminal 1 stops it with Ctrl-C: a real process
    worker = started("worker", "remediate_app", "--concurrency", "2", cwd=tmp_path, env=env)
    try:
        enq = console("enqueue", "remediate", "--input", '{"pod": "api-1"}', cwd=tmp_path, env=env)
        assert enq.returncode == 0, enq.stderr
        eid = enq.stdout.strip()

        def status() -> str:
            with psycopg.connect(dsn) as conn:
                return conn.execute(
                    "SELECT status FROM kestrel.workflow_executions WHERE id = %s", (int(eid),)
                ).fetchone()[0]

        wait_for(lambda: status() == "waiting", timeout=20, what="the approval gate")
        # The README's line, as written: --operator after the command name.
        approve = console(
            "approve", eid, "approve-fix", "--comment", "lgtm", "--operator", "alice", cwd=tmp_path, env=env
        )
        assert approve.returncode == 0, approve.stderr
        assert f"approved 'approve-fix' of execution {eid} as alice" in approve.stdout
        again = console("approve", eid, "approve-fix", cwd=tmp_path, env=env)
        assert again.returncode == 1 and "already decided (approved by alice" in again.stderr
        wait_for(lambda: status() == "success", timeout=20, what="the workflow to finish")
        with psycopg.connect(dsn) as conn:
            output = conn.execute(
                "SELECT output FROM kestrel.workflow_executions WHERE id = %s", (int(eid),)
            ).fetchone()[0]
        assert output == {"pr": "https://git.example.com/infra/pull/42"}
        # Ctrl-C once every worker process has started: one still importing would exit 130.
        wait_for(lambda: live_workers(dsn) == default_processes(), timeout=60, what="every worker process to start")
    finally:
        worker.send_signal(signal.SIGINT)
        log = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0, log
    assert "event=finished" in log and f"execution_id={eid}" in log


def test_schema_option_overrides_the_apps_own_even_when_it_is_the_default(dsn: str, tmp_path: Path) -> None:
    """``--schema kestrel`` wins over an app built with another schema (the default value was
    once the "not given" marker, so the worker ran on the app's unmigrated schema and failed);
    the CLI builds its own app, the module's is left as it was built."""
    (tmp_path / "elsewhere_app.py").write_text(
        "from kestrel_core import Kestrel\napp = Kestrel(schema='never_migrated_kt')\n"
        "app.workflow('noop')(lambda ctx, _: None)\n"
    )
    worker = started(
        "--schema", "kestrel", "worker", "elsewhere_app", "--processes", "1", cwd=tmp_path, env={"KESTREL_DSN": dsn}
    )
    try:
        wait_for(lambda: live_workers(dsn) == 1 or worker.poll() is not None, timeout=30, what="the worker")
        assert worker.poll() is None, worker.stdout.read() if worker.stdout else ""
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=30)
    assert worker.returncode == 0
