"""Property: random workflow names, step ids, comments and SQL values (markup, emoji codes,
brackets, control characters, wide characters) read on the screen exactly as ``show --format
json`` returns them, control characters spelled as escapes (issue 20).

Seeded random strings (no extra test dependency): each seed is one example, the same on
every run, and a failure names it."""

from __future__ import annotations

import json
import random

import pytest

from kestrel_console.safe_text import visible
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.sql import SqlScreen
from kestrel_console.tui.widgets.results import ResultsTable
from tests.cli import script

from .helpers import fresh, on_screen, open_screen, screen_lines, wait_for
from .test_sql import run

PIECES = [
    "[",
    "]",
    "[b]",
    "[/b]",
    "[/]",
    "[link=http://x]",
    "[@click=app.quit]",
    ":fire:",
    ":child:",
    ":rocket:",
    "\\",
    "\x1b[31m",
    "\x07",
    "\r",
    "\t",
    "\u202e",
    "名",
    "前",
    "🔥",
    "ｗ",
    "a",
    "b",
    "-",
    "+",
    ":",
    "=",
    "'",
    '"',
    "x",
    "1",
]
SEEDS = range(8)


def hostile(rng: random.Random, prefix: str) -> str:
    """A short random string of markup, emoji codes and odd characters, unique by ``prefix``."""
    return prefix + "".join(rng.choice(PIECES) for _ in range(rng.randint(2, 6)))


def insert(db, rng: random.Random, n: int) -> dict[str, str | int]:
    name, step, gate, comment = (
        hostile(rng, f"w{n}"),
        hostile(rng, f"s{n}"),
        hostile(rng, f"g{n}"),
        hostile(rng, f"c{n}"),
    )
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, started_at, finished_at) "
        "VALUES (%s, 'success', now() - interval '5 s', now()) RETURNING id",
        (name,),
    ).fetchone()[0]
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, started_at, finished_at, "
        "outcome) VALUES (%s, %s, 1, 'w1', now() - interval '4 s', now() - interval '3 s', 'success')",
        (eid, step),
    )
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, resolved_at, decision, "
        "decided_by, comment, decided_at) VALUES (%s, %s, 'approval', now() - interval '3 s', "
        "now() - interval '2 s', 'approved', 'alice', %s, now() - interval '2 s')",
        (eid, gate, comment),
    )
    return {"id": eid, "name": name, "step": step, "gate": gate, "comment": comment}


def shown_by_show_json(dsn: str, eid: int) -> dict[str, str]:
    """What ``show ID --format json`` says the execution's texts are."""
    done = script.console("show", str(eid), "--format", "json", dsn=dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    [execution] = json.loads(done.stdout)
    by_kind = {t["kind"]: t for t in execution["timeline"]}
    return {
        "name": execution["workflow_name"],
        "step": by_kind["step"]["step_id"],
        "gate": by_kind["approval"]["step_id"],
        "comment": by_kind["approval"]["comment"],
    }


@pytest.mark.parametrize("size", [(200, 50)])
async def test_random_texts_read_on_every_screen_as_show_json_returns_them(dsn, reader_dsn, db, size):
    examples = [insert(db, random.Random(seed), seed) for seed in SEEDS]
    async with on_screen(dsn, "2", ExecutionsScreen, size=size, reader_dsn=reader_dsn) as (tui, pilot, listing):
        for example in examples:
            stored = shown_by_show_json(dsn, int(example["id"]))
            assert stored == {k: example[k] for k in stored}, example  # the JSON is the stored text
            cell = listing.table.get_cell(str(example["id"]), "workflow")
            assert cell.plain == visible(stored["name"]), example

            detail = DetailScreen(int(example["id"]))
            await pilot.app.push_screen(detail)
            await fresh(pilot, detail)
            wanted = [visible(stored[key]) for key in ("name", "step", "gate", "comment")]
            await wait_for(
                pilot,
                lambda: all(w in "\n".join(screen_lines(tui)) for w in wanted),
                what=f"{wanted} on the detail screen (it shows:\n" + "\n".join(screen_lines(tui)),
            )
            await pilot.press("q")
            await wait_for(pilot, lambda: tui.screen is listing, what="back to the list")

        sql = await open_screen(pilot, "4", SqlScreen)
        await run(pilot, sql, "SELECT step_id, comment FROM workflow_waits ORDER BY execution_id")
        table = sql.query_one(ResultsTable)
        cells = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert cells == [[visible(str(e["gate"])), visible(str(e["comment"]))] for e in examples]
        await pilot.press("ctrl+q")
