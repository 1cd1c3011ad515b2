"""The docs' `kestrel-console` examples match what the program does.

Every command in the README's Quick start and worked example, the demo's section of the
console page, the Command line page and the ad-hoc SQL section of the operations page (code
blocks, inline code and the command table) is checked against the installed script: each
subcommand exists and each option it uses is one `--help` lists. The `$ kestrel-console ...`
transcripts of the Command line page run for real on a seeded database, with the exit status
the page shows (`[exit 1]` where it shows one, else 0).
"""

from __future__ import annotations

import re
import shlex
from functools import cache

import psycopg
import pytest

from tests.readme_blocks import section
from tests.seed import seed_history

from .script import console

# (heading, file) of every section whose commands are checked.
SECTIONS = (
    ("Quick start", "README.md"),
    ("A worked example", "README.md"),
    ("The demo", "docs/console.md"),
    ("Command line", "docs/command-line.md"),
    ("Ad-hoc SQL is read-only, in three layers", "docs/operations.md"),
)
COMMAND_LINE = ("Command line", "docs/command-line.md")
GLOBAL_OPTIONS_WITH_VALUE = {"--dsn", "--schema", "--operator", "--queries"}
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def example_commands() -> list[str]:
    """Every `kestrel-console ...` (or `demo ...` / table row) command of the sections, as the
    words after `kestrel-console`."""
    found: list[str] = []
    for title, doc in SECTIONS:
        text = section(title, doc)
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("$ kestrel-console"):
                found.append(line[len("$ kestrel-console") :].split("[exit")[0].strip())
            elif line.startswith("kestrel-console ") or "bin/kestrel-console " in line:
                found.append(line.split("kestrel-console", 1)[1].split("#")[0].strip())
            elif line.startswith("| `") and (title, doc) == COMMAND_LINE:
                for cell in re.findall(r"`([a-z][^`]*)`", line.split("|")[1]):
                    found.append(cell.replace("kestrel-console", "").strip())
        for inline in re.findall(r"`((?:kestrel-console |demo |list |status |show )[^`]*)`", text):
            found.append(inline.replace("kestrel-console", "").strip())
    return [c for c in dict.fromkeys(found)]


@cache
def help_text(command: str | None) -> str:
    done = console(*(command.split() if command else []), "--help", env={"COLUMNS": "250"})
    assert done.returncode == 0, f"kestrel-console {command or ''} --help failed: {done.stderr}"
    return done.stdout


GROUPS = {"queue", "schedule", "bulk"}  # commands with subcommands: `queue list`, `schedule add`


def subcommand(words: list[str]) -> str | None:
    """The subcommand of a command line: the first word not a global option (or its value),
    with the next word too for a group (``queue list``)."""
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
        elif word in GLOBAL_OPTIONS_WITH_VALUE:
            skip = True
        elif not word.startswith("-"):
            following = words[i + 1] if i + 1 < len(words) else ""
            if word in GROUPS and following.isidentifier():
                return f"{word} {following}"
            return word
    return None


def test_the_readme_has_examples_to_check() -> None:
    commands = example_commands()
    subcommands = {subcommand(c.split()) for c in commands}
    assert {
        "demo",
        "status",
        "list",
        "show",
        "approve",
        "report",
        "sql",
        "enqueue",
        "migrate",
        "worker",
    } <= subcommands, subcommands


@pytest.mark.parametrize("command", example_commands(), ids=lambda c: c[:70] or "(no subcommand)")
def test_every_readme_command_uses_options_the_program_has(command: str) -> None:
    try:
        words = shlex.split(command)
    except ValueError:  # a table cell's placeholder text, not shell
        words = command.split()
    name = subcommand(words)
    listed = help_text(name) if name else ""
    everything = listed + help_text(None)
    if name:
        assert f"kestrel-console {name}" in listed, f"no subcommand {name!r} ({command})"
    for option in _OPTION.findall(command):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", everything), (
            f"`{command}` in the docs uses {option}, which `kestrel-console {name or ''} --help` does not list"
        )


def transcripts() -> list[tuple[str, int]]:
    """The `$ kestrel-console ...` lines of the Command line page and the exit status shown."""
    found = []
    lines = section(*COMMAND_LINE).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("$ kestrel-console"):
            shown = "\n".join(lines[i : i + 3])
            code = 1 if "[exit 1]" in shown else 0
            found.append((line[len("$ kestrel-console") :].strip(), code))
    return found


def test_the_command_line_transcripts_run_as_shown(dsn: str, reader_dsn: str, db: psycopg.Connection) -> None:
    seed_history(db)
    assert len(transcripts()) >= 7
    for command, expected in transcripts():
        # The tests' login is a superuser: `sql` runs on a reader login, as the docs say.
        done = console(*shlex.split(command), env={"KESTREL_DSN": dsn, "KESTREL_READER_DSN": reader_dsn})
        assert done.returncode == expected, f"kestrel-console {command}: exit {done.returncode}\n{done.stderr}"
        if expected:
            assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr, done.stderr
