"""The README's `kestrel-console` examples match what the program does.

Every command in the Quick start, the worked example and the Command line sections (code
blocks, inline code and the command table) is checked against the installed script: each
subcommand exists and each option it uses is one `--help` lists. The `$ kestrel-console ...`
transcripts of the Command line section run for real on a seeded database, with the exit
status the README shows (`[exit 1]` where it shows one, else 0).
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import psycopg
import pytest

from tests.seed import seed_history

from .script import console

README = Path(__file__).resolve().parents[2] / "README.md"
SECTIONS = ("Quick start", "A worked example", "Command line")
GLOBAL_OPTIONS_WITH_VALUE = {"--dsn", "--schema", "--operator", "--queries"}
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def section(title: str) -> str:
    """The README text under ``## title``, up to the next ``## `` heading."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def example_commands() -> list[str]:
    """Every `kestrel-console ...` (or `demo ...` / table row) command of the three sections,
    as the words after `kestrel-console`."""
    found: list[str] = []
    for title in SECTIONS:
        text = section(title)
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("$ kestrel-console"):
                found.append(line[len("$ kestrel-console") :].split("[exit")[0].strip())
            elif line.startswith("kestrel-console ") or "bin/kestrel-console " in line:
                found.append(line.split("kestrel-console", 1)[1].split("#")[0].strip())
            elif line.startswith("| `") and title == "Command line":
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


GROUPS = {"queue", "schedule"}  # commands with subcommands: `queue list`, `schedule add`


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
            f"`{command}` in the README uses {option}, which `kestrel-console {name or ''} --help` does not list"
        )


def transcripts() -> list[tuple[str, int]]:
    """The `$ kestrel-console ...` lines of the Command line section and the exit status shown."""
    found = []
    lines = section("Command line").splitlines()
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
        # The tests' login is a superuser: `sql` runs on a reader login, as the README says.
        done = console(*shlex.split(command), env={"KESTREL_DSN": dsn, "KESTREL_READER_DSN": reader_dsn})
        assert done.returncode == expected, f"kestrel-console {command}: exit {done.returncode}\n{done.stderr}"
        if expected:
            assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr, done.stderr
