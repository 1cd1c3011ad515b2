"""No CLI message shows a DSN's password, in process or as a real process (moved from
tests/core/test_roles.py: the engine's tests do not import the console, issue 11)."""

from __future__ import annotations

import pytest
from psycopg.conninfo import make_conninfo

from tests.cli.script import console

SECRET = "s3cr3t-Pa55"
CLOSED = [
    f"postgresql://kestrel:{SECRET}@127.0.0.1:1/kestrel",
    f"host=127.0.0.1 port=1 user=kestrel password={SECRET} dbname=kestrel",
]
COMMANDS = [
    ["migrate"],
    ["roles"],
    ["prune", "--older-than", "30d"],
    ["prune", "--older-than", "1d", "--dry-run"],
    ["enqueue", "w"],
    ["approve", "1", "gate"],
    ["cancel", "1"],
    ["requeue", "1"],
    ["status"],
    ["list"],
    ["show", "1"],
    ["sql", "SELECT 1"],
]


@pytest.mark.parametrize("target", CLOSED, ids=["url", "keywords"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] + ("-dry" if "--dry-run" in c else ""))
def test_no_message_shows_the_password(target: str, command: list[str]) -> None:
    result = console(*command, dsn=target)
    assert result.returncode == 1, (result.returncode, result.stdout + result.stderr)
    assert result.stderr.startswith("error: ") and "cannot connect" in result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_no_message_shows_the_password_from_a_real_process(migrated: str) -> None:
    """A reachable server refusing the database, as a subprocess: exit 1, no traceback, no password."""
    target = make_conninfo(migrated, dbname="no_such_db_kt", password=SECRET)
    for given in ({"dsn": target}, {"env": {"KESTREL_DSN": target}}):
        done = console("prune", "--older-than", "1d", **given, subprocess=True)
        assert done.returncode == 1, done.stderr
        assert "no_such_db_kt" in done.stderr and "Traceback" not in done.stderr
        assert SECRET not in done.stdout + done.stderr
