"""A cancelled execution's step that was running is shown closed at the cancel, not running on."""

from __future__ import annotations

import json

import psycopg
import pytest

from kestrel_core import Kestrel
from tests.cli.script import console
from tests.seed import cancelled_mid_step


def test_show_closes_the_running_step_of_a_cancelled_execution(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    eid = cancelled_mid_step(app, db)
    finished_at, ran_for = db.execute(
        "SELECT e.finished_at, extract(epoch FROM e.finished_at - a.started_at)::float FROM workflow_executions e "
        "JOIN step_attempts a ON a.execution_id = e.id AND a.step_id = 'rollout' WHERE e.id = %s",
        (eid,),
    ).fetchone()
    shown = console("show", str(eid), "--format", "json", dsn=dsn)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    doc = json.loads(shown.stdout)
    timeline = doc[0]["timeline"] if isinstance(doc, list) else doc["timeline"]
    rollout = next(e for e in timeline if e["step_id"] == "rollout")
    assert rollout["outcome"] == "cancelled"
    assert rollout["finished_at"] is not None and rollout["duration_s"] is not None
    # From its start to the cancel, not growing with the clock (the seed started it 5 s earlier).
    assert ran_for >= 5.0 and rollout["duration_s"] == pytest.approx(ran_for, abs=0.001)
    assert rollout["finished_at"].startswith(finished_at.isoformat()[:19])
    table = console("show", str(eid), dsn=dsn)
    assert table.returncode == 0, table.stdout + table.stderr
    line = next(line for line in table.stdout.splitlines() if line.startswith("rollout"))
    assert "cancelled" in line and "…" not in line
