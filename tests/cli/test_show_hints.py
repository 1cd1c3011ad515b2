"""``show`` names the commands that fix a blocked execution, never the TUI's keys (issue 20):
it printed "re-enqueue it now (e)" and "approve (a) or reject (x)", keys the CLI does not have."""

from __future__ import annotations

import json

from tests.cli.script import console
from tests.seed import seed_history


def show(dsn: str, eid: int, *args: str) -> str:
    done = console("show", str(eid), *args, env={"COLUMNS": "200"}, dsn=dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_show_names_cli_commands_in_its_why_line(dsn, db):
    facts = seed_history(db)
    stuck, gate = facts.id("stuck"), facts.id("pending_approval")
    for eid, command in (
        (stuck, f"kestrel-console requeue {stuck}"),
        (gate, f"kestrel-console approve {gate} approve-fix, or reject"),
    ):
        table = show(dsn, eid)
        [blocker] = [json.loads(show(dsn, eid, "--format", "json"))[0]["blocker"]]
        for text in (table, blocker):
            assert command in " ".join(text.split()), text
            assert not any(key in text for key in ("(e)", "(a)", "(x)")), text
