"""The "Schedules" example of docs/flow-control.md, app and commands exactly as written there:
a worker declares the code schedule, the CLI adds, lists, pauses, resumes and removes another,
whose runs carry their tick and input."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

from tests.cli.script import console, started
from tests.readme_blocks import section
from tests.waiting import wait_for


def readme_example() -> tuple[str, list[str], list[str]]:
    """(schedules_app.py, terminal 1's commands, terminal 2's commands) from the docs."""
    text = section("Schedules", doc="docs/flow-control.md")
    app = re.search(r"`schedules_app.py`:\n\n```python\n(.*?)```", text, re.S).group(1)
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    commands = [[line.split("  #")[0].strip() for line in block.splitlines() if line.strip()] for block in blocks]
    return app, commands[0], commands[1]


def test_readme_schedules_example(dsn: str, db, tmp_path: Path) -> None:
    app, terminal1, terminal2 = readme_example()
    (tmp_path / "schedules_app.py").write_text(app)
    env = {"KESTREL_DSN": dsn, "USER": "not-alice"}

    def run(line: str) -> subprocess.CompletedProcess:
        args = shlex.split(line)
        assert args[0] == "kestrel-console", line
        done = console(*args[1:], cwd=tmp_path, env=env)
        assert done.returncode == 0, (line, done.stderr)
        return done

    assert terminal1 == ["kestrel-console worker schedules_app"]
    worker = started(*shlex.split(terminal1[0])[1:], cwd=tmp_path, env=env)  # a real process, stopped with a signal
    try:
        wait_for(
            lambda: db.execute(
                "SELECT cron, timezone, workflow_name, source FROM schedules WHERE name = 'weekday-digest'"
            ).fetchone(),
            timeout=30,
            what="the worker to declare weekday-digest",
        )
        add, listing, pause, status, resume, remove = terminal2

        run(add)
        runs = "SELECT input, status, output FROM workflow_executions WHERE workflow_name = 'ping' ORDER BY id"
        wait_for(lambda: any(r[1] == "success" for r in db.execute(runs)), timeout=30, what="a ping run")
        first = db.execute(runs).fetchall()[0]
        assert first[0]["target"] == "db-1" and first[0]["schedule"] == "ping-db"
        assert first[2] == {"pinged": "db-1", "at": first[0]["scheduled_at"]}
        wait_for(
            lambda: "ping-db" in run(listing).stdout and "success" in run(listing).stdout,
            what="the list to show the last run",
        )

        run(pause)
        paused_at = db.execute("SELECT paused_at FROM schedules WHERE name = 'ping-db'").fetchone()[0]
        assert "paused schedule: 'ping-db'" in run(status).stdout
        # Stay paused across at least one tick (5 s), then resume: that tick never runs.
        wait_for(
            lambda: db.execute("SELECT now() > %s", (paused_at + timedelta(seconds=6),)).fetchone()[0],
            timeout=20,
            interval=0.5,
            what="a tick to pass while paused",
        )
        resumed_at = db.execute("SELECT now()").fetchone()[0]
        run(resume)
        wait_for(
            lambda: db.execute(
                "SELECT count(*) FROM workflow_executions WHERE workflow_name = 'ping'"
                " AND (input->>'scheduled_at')::timestamptz > %s",
                (resumed_at,),
            ).fetchone()[0],
            timeout=30,
            what="a tick after the resume",
        )
        assert db.execute(
            "SELECT count(*) FROM workflow_executions WHERE workflow_name = 'ping' AND"
            " (input->>'scheduled_at')::timestamptz BETWEEN %s AND %s",
            (paused_at + timedelta(seconds=1), resumed_at),
        ).fetchone() == (0,)
        run(remove)
        assert db.execute("SELECT name FROM schedules").fetchall() == [("weekday-digest",)]
        assert db.execute("SELECT actor, action, comment FROM operator_actions ORDER BY id").fetchall() == [
            ("not-alice", "add_schedule", None),
            ("alice", "pause_schedule", "db maintenance"),
            ("alice", "resume_schedule", None),
            ("alice", "remove_schedule", None),
        ]
    finally:
        worker.send_signal(signal.SIGINT)
        log = worker.communicate(timeout=30)[0]
    assert worker.returncode == 0, log
    assert "event=scheduled" in log
