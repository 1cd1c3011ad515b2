"""The timeline never drops a row (issue 20, defect 3): a summary as long as the info column
(any failed attempt, any decided approval) wrapped onto a second line, the widget kept the
height of one line per lane, and the last lanes (``open-pr``) were cut off, at 200 columns too.
"""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.timeline import Timeline

from .helpers import console, fresh, screen_lines, wait_for

STEPS = ("rca", "fix", "approve-fix", "cool-down", "open-pr")


def remediated(db, step_ids=STEPS) -> int:
    """A finished remediation: rca, fix (failed once, then succeeded), an approval decided with
    a long comment by a long name, a sleep, open-pr."""
    rca, fix, gate, sleep, pr = step_ids
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, started_at, finished_at, output) "
        "VALUES ('remediate', 'success', now() - interval '60 s', now(), '{}') RETURNING id"
    ).fetchone()[0]
    attempt = (
        "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, started_at, finished_at, "
        "outcome, error) VALUES (%s, %s, %s, 'worker-host-a-1234', now() - %s::interval, "
        "now() - %s::interval, %s, %s)"
    )
    db.execute(attempt, (eid, rca, 1, "59 s", "55 s", "success", None))
    db.execute(attempt, (eid, fix, 1, "54 s", "50 s", "error", "ConnectionError: the API timed out"))
    db.execute(attempt, (eid, fix, 2, "48 s", "44 s", "success", None))
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, resolved_at, decision, "
        "decided_by, comment, decided_at) VALUES (%s, %s, 'approval', now() - interval '43 s', "
        "now() - interval '30 s', 'approved', 'alice.longname@example.com', 'lgtm, ship it please', "
        "now() - interval '30 s')",
        (eid, gate),
    )
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, wake_at, resolved_at) "
        "VALUES (%s, %s, 'sleep', now() - interval '29 s', now() - interval '10 s', now() - interval '10 s')",
        (eid, sleep),
    )
    db.execute(attempt, (eid, pr, 1, "9 s", "1 s", "success", None))
    return eid


def trace_rows(app) -> list[str]:
    """The timeline's rows as the terminal shows them (label │ bars │ info)."""
    return [line for line in screen_lines(app) if line.count("│") >= 3]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
@pytest.mark.parametrize(
    "steps",
    [STEPS, ("rca", "名前:fix", "approve-fix-" + "x" * 30, "cool-down", "open-pr")],
    ids=["names", "wide-and-long-names"],
)
async def test_every_lane_of_the_timeline_is_on_the_screen(dsn, db, size, steps):
    eid = remediated(db, steps)
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        screen = DetailScreen(eid)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        timeline = screen.query_one(Timeline)
        await wait_for(pilot, lambda: len(timeline.lanes) == 5, what="five lanes")
        timeline.scroll_visible(animate=False, top=True)
        await pilot.pause()
        await wait_for(
            pilot,
            lambda: any("open-pr" in row for row in trace_rows(tui)),
            what="the open-pr lane on the screen:\n" + "\n".join(screen_lines(tui)),
        )
        rows = trace_rows(tui)
        # The axis, the execution's row, then one row per lane, each on one line of the terminal.
        assert len(rows) == 7, "\n".join(screen_lines(tui))
        assert rows[1].strip("│ ").startswith("execution")
        labels = [row.strip("│ ").split("│")[0].strip().lstrip("◇☾ ") for row in rows[2:]]
        assert all(label.startswith(step[:10]) for label, step in zip(labels, steps)), labels
        assert all(row.count("│") == 4 for row in rows), rows  # border, bars, border: no wrapped half
