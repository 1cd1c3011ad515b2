"""``--help`` reads well (issue 20): flags show no ``<bool>`` value, and the commands list
gives each command's summary as whole sentences (Typer kept the docstring's line breaks there,
so ``show`` read "a bar scaled to" / "the execution's span")."""

from __future__ import annotations

import re

import pytest

from tests.cli.script import console

COMMANDS = [
    "migrate",
    "worker",
    "enqueue",
    "approve",
    "reject",
    "requeue",
    "cancel",
    "fork",
    "pause",
    "resume",
    "status",
    "list",
    "show",
    "report",
    "sql",
    "prune",
    "roles",
    "demo",
    "send-event",
    "queue",
    "schedule",
    "queue list",
    "queue pause",
    "schedule add",
    "schedule list",
]


def help_of(*words: str) -> str:
    done = console(*words, "--help", env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_no_flag_shows_a_bool_value(command):
    text = help_of(*command.split())
    assert "<bool>" not in text, text
    assert re.search(r"--help\s+-h\s+Show this message", text), text


def test_the_commands_list_wraps_whole_sentences():
    text = help_of()
    panel = text[text.index("Commands") :]
    rows: list[str] = []
    for line in panel.splitlines()[1:]:
        body = line.strip("│ ╰─╯")
        if not body:
            continue
        name, _, said = body.partition("  ")
        if name and not name.startswith(" ") and said.strip():
            rows.append(said.strip())
        elif rows:
            rows[-1] += " " + body.strip()
    show = next(r for r in rows if r.startswith("One execution"))
    assert "a bar scaled to the execution's span" in show, rows
    sql = next(r for r in rows if r.startswith("Run one read-only query"))
    assert "anything that could write is refused" in sql, rows
