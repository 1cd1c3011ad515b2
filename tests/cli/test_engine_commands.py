"""The engine's commands: migrate, enqueue, approve/reject, requeue/cancel, worker.

Through Typer's runner for speed, and real subprocesses for the worker and the README example.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from kestrel_console.cli import app as cli
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def run(dsn: str, *args: str):
    return runner.invoke(cli, ["--dsn", dsn, "--operator", "alice", *args])


def test_migrate_reports_what_it_did(database: str) -> None:
    first = run(database, "--schema", "cli_mig", "migrate")
    assert first.exit_code == 0, first.output
    assert "applied migration(s) 1, 2" in first.stdout
    again = run(database, "--schema", "cli_mig", "migrate")
    assert again.exit_code == 0 and "already up to date" in again.stdout


def test_enqueue_prints_the_id(dsn: str, db: psycopg.Connection) -> None:
    result = run(dsn, "enqueue", "remediate", "--input", '{"pod": "api-1"}')
    assert result.exit_code == 0, result.output
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
    assert result.exit_code == 2
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
    assert result.exit_code == 1
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_cancel_then_requeue_then_refusals(dsn: str, db: psycopg.Connection) -> None:
    eid = run(dsn, "enqueue", "w").stdout.strip()
    cancelled = run(dsn, "cancel", eid, "--comment", "not needed")
    assert cancelled.exit_code == 0 and f"cancelled execution {eid} (was enqueued)" in cancelled.stdout
    twice = run(dsn, "cancel", eid)
    assert twice.exit_code == 1 and "already finished (cancelled)" in twice.stderr
    requeued = run(dsn, "requeue", eid)
    assert requeued.exit_code == 0 and "(was cancelled)" in requeued.stdout
    refused = run(dsn, "requeue", eid)
    assert refused.exit_code == 1 and "is enqueued" in refused.stderr
    audit = db.execute("SELECT actor, action, comment FROM operator_actions ORDER BY id").fetchall()
    assert audit == [("alice", "cancel", "not needed"), ("alice", "requeue", None)]


def test_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--dsn", "postgresql://kestrel:s3cret@127.0.0.1:1/nowhere", "enqueue", "w"])
    assert result.exit_code == 1
    assert "cannot connect to PostgreSQL at kestrel@127.0.0.1:1/nowhere" in result.stderr
    assert "s3cret" not in result.output
    assert "Traceback" not in result.output


def test_unmigrated_database_tells_to_migrate(database: str) -> None:
    result = run(database, "--schema", "nothing_here", "enqueue", "w")
    assert result.exit_code == 1
    assert "run `kestrel-console migrate`" in result.stderr


def test_bad_usage_exits_2(dsn: str) -> None:
    assert run(dsn, "approve", "not-a-number", "gate").exit_code == 2
    assert run(dsn, "worker").exit_code == 2
    assert runner.invoke(cli, ["--schema", "bad-name!", "migrate"]).exit_code == 2


def test_worker_command_errors(dsn: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "emptyapp.py").write_text("from kestrel_core import Kestrel\napp = Kestrel()\nother = 3\n")
    missing = run(dsn, "worker", "no_such_module_here")
    assert missing.exit_code == 1 and "cannot import module 'no_such_module_here'" in missing.stderr
    no_attr = run(dsn, "worker", "emptyapp:nope")
    assert no_attr.exit_code == 1 and "has no attribute 'nope'" in no_attr.stderr
    wrong = run(dsn, "worker", "emptyapp:other")
    assert wrong.exit_code == 1 and "is a int, not a kestrel_core.Kestrel app" in wrong.stderr
    empty = run(dsn, "worker", "emptyapp")
    assert empty.exit_code == 1 and "registers no workflow" in empty.stderr


def test_worker_gives_up_on_an_unreachable_database_after_startup_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "oneapp.py").write_text(
        "from kestrel_core import Kestrel\napp = Kestrel()\napp.workflow('noop')(lambda ctx, _: None)\n"
    )
    result = runner.invoke(
        cli,
        ["--dsn", "postgresql://kestrel:s3cret@127.0.0.1:1/nowhere", "worker", "oneapp", "--startup-timeout", "0.5"],
    )
    assert result.exit_code == 1
    assert "cannot connect to PostgreSQL at kestrel@127.0.0.1:1/nowhere" in result.stderr
    assert "s3cret" not in result.output and "Traceback" not in result.output


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


def test_readme_worked_example_end_to_end(dsn: str, tmp_path: Path) -> None:
    """Terminal 1 runs `kestrel-console worker remediate_app`; terminal 2 enqueues and approves."""
    (tmp_path / "remediate_app.py").write_text(README_APP)
    env = dict(os.environ, KESTREL_DSN=dsn, USER="not-alice")
    env.pop("KESTREL_OPERATOR", None)
    cmd = [sys.executable, "-m", "kestrel_console"]
    worker = subprocess.Popen(
        cmd + ["worker", "remediate_app", "--concurrency", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        enq = subprocess.run(
            cmd + ["enqueue", "remediate", "--input", '{"pod": "api-1"}'],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        eid = enq.stdout.strip()

        def status() -> str:
            with psycopg.connect(dsn) as conn:
                return conn.execute(
                    "SELECT status FROM kestrel.workflow_executions WHERE id = %s", (int(eid),)
                ).fetchone()[0]

        wait_for(lambda: status() == "waiting", timeout=20, what="the approval gate")
        # The README's line, as written: --operator after the command name.
        approve = subprocess.run(
            cmd + ["approve", eid, "approve-fix", "--comment", "lgtm", "--operator", "alice"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert approve.returncode == 0, approve.stderr
        assert f"approved 'approve-fix' of execution {eid} as alice" in approve.stdout
        again = subprocess.run(
            cmd + ["approve", eid, "approve-fix"], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert again.returncode == 1 and "already decided (approved by alice" in again.stderr
        wait_for(lambda: status() == "success", timeout=20, what="the workflow to finish")
        with psycopg.connect(dsn) as conn:
            output = conn.execute(
                "SELECT output FROM kestrel.workflow_executions WHERE id = %s", (int(eid),)
            ).fetchone()[0]
        assert output == {"pr": "https://git.example.com/infra/pull/42"}
    finally:
        worker.send_signal(signal.SIGINT)
        log = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0, log
    assert "event=finished" in log and f"execution_id={eid}" in log
