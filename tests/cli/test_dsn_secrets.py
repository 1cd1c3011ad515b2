"""`kestrel-console --dsn BAD status`: exit 1, one clear message, no password (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.script import console
from tests.hostile_text import MALFORMED_DSNS, NOT_UTF8_DSNS, SECRET


@pytest.mark.parametrize("dsn", MALFORMED_DSNS)
def test_a_malformed_dsn_is_refused_without_its_password(dsn: str) -> None:
    done = console("status", dsn=dsn)  # the installed script, as a user runs it
    assert done.returncode == 1, done.stderr
    assert SECRET not in done.stderr + done.stdout, done.stderr
    assert "invalid DSN" in done.stderr and "Traceback" not in done.stderr


def test_the_same_from_the_environment() -> None:
    done = console("list", env={"KESTREL_DSN": f"postgresql://bob:{SECRET}%zz@127.0.0.1/app"})
    assert done.returncode == 1 and SECRET not in done.stderr and "invalid DSN" in done.stderr


@pytest.mark.parametrize("dsn", NOT_UTF8_DSNS)
@pytest.mark.parametrize("where", ["--dsn", "$KESTREL_DSN"])
def test_a_dsn_that_is_not_utf8_is_one_line_without_its_password(dsn: str, where: str) -> None:
    """Issue 18: with --dsn the "not valid UTF-8" error printed the password; from the
    environment it was a traceback."""
    if where == "--dsn":
        done = console("status", dsn=dsn)
    else:
        done = console("status", env={"KESTREL_DSN": dsn})
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "is not valid UTF-8" in lines[0] and "****" in lines[0], done.stderr


# Every command that takes --dsn / $KESTREL_DSN (the TUI and the worker's logs are below).
EVERY_COMMAND = [
    ["migrate"],
    ["roles"],
    ["enqueue", "w"],
    ["approve", "1", "gate"],
    ["reject", "1", "gate"],
    ["requeue", "1"],
    ["cancel", "1"],
    ["status"],
    ["list"],
    ["show", "1"],
    ["report", "queue-depth"],
    ["sql", "SELECT 1"],
    ["prune", "--older-than", "30d"],
    ["prune", "--older-than", "30d", "--dry-run"],
    ["send-event", "k"],
    ["queue", "list"],
    ["queue", "pause", "q"],
    ["schedule", "list"],
    ["schedule", "pause", "s"],
    ["schedule", "remove", "s"],
    ["queue", "resume", "q"],
    ["demo", "--no-tui", "--no-bot", "--duration", "1"],
]


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=lambda a: "-".join(a[:2]))
def test_every_command_refuses_a_malformed_dsn_without_its_password(args: list[str]) -> None:
    # In-process (the same code as the script, without a Python start per DSN and command).
    for dsn in MALFORMED_DSNS:
        for given in ({"env": {"KESTREL_DSN": dsn}}, {"args": ["--dsn", dsn]}):
            done = console(*given.get("args", []), *args, env=given.get("env"))
            assert done.returncode == 1, (args, dsn, done.stdout + done.stderr)
            assert SECRET not in done.stderr + done.stdout, (args, done.stderr)
            assert "invalid DSN" in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr, (args, done.stderr)


def test_the_worker_and_its_logs_never_show_the_password(tmp_path: Path) -> None:
    """A worker waiting for a database that is down logs each try; a malformed DSN is refused."""
    (tmp_path / "oneapp.py").write_text(
        "from kestrel_core import Kestrel\napp = Kestrel()\napp.workflow('noop')(lambda ctx, _: None)\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}
    down = console(
        "--dsn",
        f"postgresql://bob:{SECRET}@127.0.0.1:1/app",
        "worker",
        "oneapp",
        "--processes",
        "1",
        "--startup-timeout",
        "1",
        env=env,
        subprocess=True,  # PYTHONPATH and --processes: a real process
    )
    assert down.returncode == 1, down.stderr
    assert "event=waiting_for_database" in down.stderr and "bob@127.0.0.1:1/app" in down.stderr
    assert SECRET not in down.stderr + down.stdout
    for dsn in (f"postgresql://bob:{SECRET} x@127.0.0.1:1/app", f"host=127.0.0.1 port=1 password='{SECRET}"):
        for processes in ("1", "2"):
            done = console(
                "worker",
                "oneapp",
                "--processes",
                processes,
                "--startup-timeout",
                "1",
                env=env,
                subprocess=True,
                dsn=dsn,
            )
            assert done.returncode == 1, done.stderr
            assert "invalid DSN" in done.stderr and SECRET not in done.stderr + done.stdout
