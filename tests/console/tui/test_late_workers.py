"""A frozen worker is shown late within ~15 s, not alive until it is declared dead (issue 20):
the dashboard said ``alive`` for ~30 s after its heartbeat stopped. A worker beats every
lease/3, and its lease is read from the leases it renews."""

from __future__ import annotations

import re

import pytest

from kestrel_console.tui.screens.dashboard import DashboardScreen
from tests.cli import script

from .helpers import console, open_screen, screen_lines

WORKER = (
    "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, started_at, last_heartbeat) "
    "VALUES (%s, 'h', 1, ARRAY['w'], 2, now() - interval '1 hour', now() - %s::interval)"
)
HELD = (
    "INSERT INTO workflow_executions (workflow_name, status, owner_id, started_at, lease_expires) "
    "VALUES ('w', 'running', %s, now() - interval '1 min', now() + %s::interval)"
)


def workers(db) -> dict[str, str]:
    """worker id -> the state it must be shown in."""
    db.execute(WORKER, ("frozen", "20 s"))  # default 30 s lease, renewed 20 s ago: 2 beats missed
    db.execute(HELD, ("frozen", "10 s"))
    db.execute(WORKER, ("idle-frozen", "20 s"))  # holds nothing: the default lease's beat
    db.execute(WORKER, ("slow-beat", "20 s"))  # --lease 120: beats every 40 s, on time
    db.execute(HELD, ("slow-beat", "100 s"))
    db.execute(WORKER, ("fine", "2 s"))
    return {"fine": "alive", "slow-beat": "alive", "frozen": "late", "idle-frozen": "late"}


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_worker_whose_beat_is_overdue_is_shown_late(dsn, db, size):
    expected = workers(db)
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        await open_screen(pilot, "1", DashboardScreen)
        shown = "\n".join(screen_lines(tui))
        for worker, state in expected.items():
            assert re.search(rf"\b{worker}\b.*\b{state}\b", shown), (worker, state, shown)
    status = script.console("status", env={"COLUMNS": "200"}, dsn=dsn).stdout
    for worker, state in expected.items():
        assert re.search(rf"\b{worker}\b.*\b{state}\b", status), (worker, state, status)
