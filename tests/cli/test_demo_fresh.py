"""`demo`: its help names the data folder it really uses (as root too), it says where the data
is, --no-bot leaves every approval pending, --no-tui prints each execution's whole run time
(waits included), and --fresh starts from an empty database."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import psycopg
import pytest

from kestrel_console.demo.events import describe_worker_event
from kestrel_console.embedded_pg import LocalCluster, default_data_dir

from .script import console, run_demo

FINISHED = re.compile(r"^\d\d:\d\d:\d\d success #(\d+) (\S+) in ([\d.]+)s$")
RUN_TIMES = """
SELECT id, extract(epoch FROM finished_at - started_at)::float8,
       (SELECT extract(epoch FROM max(w.wake_at - w.created_at))::float8
          FROM kestrel.workflow_waits w WHERE w.execution_id = e.id AND w.kind = 'sleep')
  FROM kestrel.workflow_executions e WHERE status = 'success'
"""
APPROVALS = """
SELECT count(*) FILTER (WHERE w.decided_by IS NOT NULL),
       count(*) FILTER (WHERE w.resolved_at IS NULL AND e.input ->> 'severity' <> 'critical')
  FROM kestrel.workflow_waits w JOIN kestrel.workflow_executions e ON e.id = w.execution_id
 WHERE w.kind = 'approval'
"""
COUNTS = """
SELECT (SELECT count(*) FROM kestrel.workflow_executions), (SELECT count(*) FROM kestrel.workflow_waits),
       (SELECT count(*) FROM kestrel.workers)
"""


def demo(data_dir: Path, *args: str) -> tuple[str, str]:
    """Run `demo --no-tui ARGS` to its end on the private server in ``data_dir``; (stdout, stderr)."""
    done = run_demo(data_dir, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, done.stderr


def words(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_help_names_the_data_folder_the_demo_uses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KESTREL_DEMO_DIR", raising=False)
    expected = default_data_dir()  # as root /var/lib/kestrel/demo-pg, not ~/.local/share/...
    # The help is written when the command is defined, at import: a fresh process reads the folder.
    shown = console("demo", "--help", env={"COLUMNS": "200"}, subprocess=True)
    assert shown.returncode == 0, shown.stderr
    assert f"whose data is in {expected}" in words(shown.stdout)
    assert "--fresh" in shown.stdout and "--no-bot" in shown.stdout
    assert "demo-bot" in words(shown.stdout)
    mine = tmp_path / "elsewhere"
    shown = console("demo", "--help", env={"COLUMNS": "200", "KESTREL_DEMO_DIR": str(mine)}, subprocess=True)
    assert f"whose data is in {mine}" in words(shown.stdout)


def test_no_bot_run_times_and_fresh(demo_dir: Path) -> None:
    out, err = demo(demo_dir, "--no-bot", "--rate", "0", "--duration", "9")
    assert f"Data: {demo_dir} " in out
    assert "Approvals: all wait for you (--no-bot)." in out
    printed = {int(m[1]): float(m[3]) for m in map(FINISHED.match, out.splitlines()) if m}
    with LocalCluster(demo_dir) as cluster, psycopg.connect(cluster.dsn_for("kestrel_demo")) as conn:
        decided, pending_for_bot = conn.execute(APPROVALS).fetchone()
        run_times = {eid: (took, slept) for eid, took, slept in conn.execute(RUN_TIMES).fetchall()}
        before = conn.execute(COUNTS).fetchone()
    # The seed's non-critical incidents opened their gates ~8 s ago: no bot decided them.
    assert decided == 0 and pending_for_bot >= 1, (decided, pending_for_bot)
    # Each success line shows start-to-finish time, waits included (not the last claim's 0.0 s).
    resumed = [eid for eid, (_, slept) in run_times.items() if slept and eid in printed]
    assert resumed, f"no execution resumed after a wait was printed:\n{out}"
    for eid in printed:
        assert abs(printed[eid] - run_times[eid][0]) <= 0.06, (eid, printed[eid], run_times[eid])
    # Each resumed run lasted at least its durable sleep (the seed's are 0.6-1.6 s).
    assert all(run_times[eid][0] >= run_times[eid][1] for eid in resumed), {e: run_times[e] for e in resumed}

    out, err = demo(demo_dir, "--fresh", "--no-seed", "--rate", "0", "--duration", "1")
    assert "--fresh: dropped database 'kestrel_demo'" in err
    assert "executions of earlier runs are kept" not in err
    with LocalCluster(demo_dir) as cluster, psycopg.connect(cluster.dsn_for("kestrel_demo")) as conn:
        after = conn.execute(COUNTS).fetchone()
    assert before[0] > 0 and before[1] > 0
    assert after == (0, 0, 2), f"only this run's two workers should be left, not {after}"


def test_fresh_on_a_configured_database_empties_the_demos_schema(dsn: str) -> None:
    schema = "demo_fresh"

    def in_schema(*args: str) -> subprocess.CompletedProcess[str]:
        return console("--schema", schema, "demo", "--no-tui", *args, dsn=dsn, timeout=120, subprocess=True)

    first = in_schema("--no-bot", "--rate", "0", "--duration", "1")
    assert first.returncode == 0, first.stderr
    with psycopg.connect(dsn) as conn:
        seeded = conn.execute(f"SELECT count(*) FROM {schema}.workflow_executions").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM kestrel.workflow_executions").fetchone()[0] == 0
    again = in_schema("--fresh", "--no-seed", "--rate", "0", "--duration", "0.5")
    assert again.returncode == 0, again.stderr
    assert f"--fresh: dropped schema '{schema}'" in " ".join(again.stderr.split())
    with psycopg.connect(dsn) as conn:
        left = conn.execute(f"SELECT count(*) FROM {schema}.workflow_executions").fetchone()[0]
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.commit()
    assert seeded > 0 and left == 0


def test_a_finished_line_shows_the_databases_run_time_not_the_workers_clock() -> None:
    """The worker's duration_s also counts its own queueing after the commit (0.4 s on a busy
    machine for a run the database timed at 0.34 s): the line must show the database's time."""
    line = "event=finished execution_id=16 workflow=ci-pipeline status=success duration_s=0.400"
    assert describe_worker_event(line, run_time=lambda eid: 0.338676).endswith("#16 ci-pipeline in 0.3s")
    assert describe_worker_event(line, run_time=lambda eid: 12.04).endswith("in 12.0s")  # waits included
    assert describe_worker_event(line, run_time=lambda eid: None).endswith("in 0.4s")  # row not found
