"""``kestrel-console demo --no-tui`` on a machine with no database configured.

The demo runs as a real subprocess with no $KESTREL_DSN, $PGHOST or $PGPORT, so it must start
its own private PostgreSQL (in a fresh $KESTREL_DEMO_DIR), run workers and workflows on it,
print a DSN other commands can use, stop the server when it exits, and find its data again on
the next run.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from kestrel_console.demo.database import DEMO_READER_LOGIN
from tests.cli.script import console, environment
from tests.conftest import reachable
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
READ_COMMANDS = REPO / "kestrel_console" / "cli" / "read_commands.py"

STATUS_COUNTS = "SELECT status, count(*) FROM kestrel.workflow_executions GROUP BY status"
PENDING_APPROVALS = """
SELECT count(*) FROM kestrel.workflow_waits w
JOIN kestrel.workflow_executions e ON e.id = w.execution_id
WHERE w.kind = 'approval' AND w.resolved_at IS NULL AND e.status = 'waiting'
"""
LIVE_WORKERS = "SELECT count(*) FROM kestrel.workers WHERE stopped_at IS NULL"
EXECUTION_IDS = "SELECT id FROM kestrel.workflow_executions ORDER BY id"
BOT_DECISIONS = """
SELECT e.input ->> 'severity', w.decision FROM kestrel.workflow_waits w
JOIN kestrel.workflow_executions e ON e.id = w.execution_id
WHERE w.decided_by = 'demo-bot'
"""


class Demo:
    """One ``kestrel-console demo --no-tui`` subprocess, its stdout read line by line."""

    def __init__(self, data_dir: Path, duration: float) -> None:
        self.env = {"KESTREL_DEMO_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kestrel_console", "demo", "--no-tui", "--duration", str(duration)],
            cwd=REPO,
            env=environment(self.env),
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_dsn(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if line.startswith("DSN: "):
                return line[len("DSN: ") :]
        pytest.fail(f"the demo printed no DSN line; output:\n{self.output()}")

    def finish(self, timeout: float = 60) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the demo did not exit; output:\n{self.output()}")
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return code

    def output(self) -> str:
        self.stderr.seek(0)
        return "\n".join(self.lines) + "\n--- stderr ---\n" + self.stderr.read()

    def cli(self, *args: str, dsn: str) -> subprocess.CompletedProcess[str]:
        """Another ``kestrel-console ARGS`` on the demo's database, beside the running demo."""
        return console(*args, env={**self.env, "KESTREL_DSN": dsn})


def wait_for_activity(dsn: str, timeout: float = 20) -> tuple[dict[str, int], int, int]:
    """Until success and waiting executions and a pending approval exist: the executions by
    status, the pending approvals and the live workers then."""
    seen: list[tuple[dict[str, int], int, int]] = []

    def activity() -> tuple[dict[str, int], int, int] | None:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            counts = dict(conn.execute(STATUS_COUNTS).fetchall())
            pending = conn.execute(PENDING_APPROVALS).fetchone()[0]
            workers = conn.execute(LIVE_WORKERS).fetchone()[0]
        seen[:] = [(counts, pending, workers)]
        return seen[0] if counts.get("success") and counts.get("waiting") and pending else None

    try:
        return wait_for(activity, timeout, 0.5, "a success, a waiting execution and a pending approval")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen (by status, pending, workers): {seen}") from None


def wait_for_bot(dsn: str, timeout: float = 15) -> list[tuple[str, str]]:
    """Until the bot operator has decided some gate; returns (severity, decision) pairs."""

    def decisions() -> list[tuple[str, str]]:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            return conn.execute(BOT_DECISIONS).fetchall()

    return wait_for(decisions, timeout, 0.5, "the bot operator to decide a gate")


def test_demo_runs_on_its_own_server_and_keeps_its_data(demo_dir: Path) -> None:
    demo = Demo(demo_dir, duration=14)
    try:
        dsn = demo.wait_for_dsn()
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            data_directory = conn.execute("SHOW data_directory").fetchone()[0]
        assert Path(data_directory).resolve() == demo_dir.resolve(), "not the demo's private server"

        counts, pending, workers = wait_for_activity(dsn)
        assert counts.get("success", 0) > 0, counts
        assert counts.get("waiting", 0) > 0 and pending > 0, (counts, pending)
        assert len(counts) >= 3, f"executions in only {sorted(counts)}"
        assert workers >= 2, "the demo should run several workers"

        if READ_COMMANDS.exists():
            status = demo.cli("status", dsn=dsn)
            assert status.returncode == 0, status.stderr
            assert "remediate-incident" in status.stdout
            listed = demo.cli("list", "--format", "json", "--limit", "500", dsn=dsn)
            assert listed.returncode == 0, listed.stderr
            rows = json.loads(listed.stdout)
            assert {row["workflow_name"] for row in rows} >= {"remediate-incident", "provision-resource", "ci-pipeline"}
            # Its login is a superuser, refused for ad-hoc SQL; the demo made a reader login
            # (the one its SQL screen uses) and says how to use it (issue 18).
            assert demo.cli("sql", "SELECT 1", dsn=dsn).returncode == 1
            reader = make_conninfo(dsn, user=DEMO_READER_LOGIN)
            mine = demo.cli(
                "--reader-dsn", reader, "sql", "--format", "csv", "SELECT current_user::text AS who", dsn=dsn
            )
            assert (mine.returncode, mine.stdout) == (0, "who\nkestrel_reader\n"), mine.stderr

        decisions = wait_for_bot(dsn)
        assert decisions, "the bot operator decided no approval"
        assert {decision for _, decision in decisions} <= {"approved", "rejected"}
        assert "critical" not in {severity for severity, _ in decisions}, "critical gates are for humans"

        with psycopg.connect(dsn, connect_timeout=5) as conn:
            first_ids = [row[0] for row in conn.execute(EXECUTION_IDS).fetchall()]
    finally:
        code = demo.finish()
    assert code == 0, demo.output()
    assert "--duration 14s reached" in demo.output()
    assert f"KESTREL_READER_DSN='{make_conninfo(dsn, user=DEMO_READER_LOGIN)}'" in demo.output()
    assert not reachable(dsn), "the demo's server still runs after the demo exited"
    assert "password" not in demo.output().lower()

    again = Demo(demo_dir, duration=2)
    try:
        dsn = again.wait_for_dsn()
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            kept = {row[0] for row in conn.execute(EXECUTION_IDS).fetchall()}
    finally:
        code = again.finish()
    assert code == 0, again.output()
    assert set(first_ids) <= kept, "executions of the first run are gone"
    assert len(kept) > len(first_ids)  # and this run seeded more
    assert "reusing the private PostgreSQL" in again.output()
    assert not reachable(dsn)
