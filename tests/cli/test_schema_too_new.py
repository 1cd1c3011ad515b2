"""A database migrated by a newer Kestrel: the console, migrate and the worker each refuse it
with one line (exit 1), never run on it or write their older schema over it (issue 19)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from kestrel_core.db.migrate import LATEST
from tests.cli.script import console

LINE = f"is at version {LATEST + 1}, this code knows up to {LATEST}: upgrade kestrel"


@pytest.fixture(scope="module")
def newer(migrated: str) -> str:
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute("INSERT INTO kestrel.schema_migrations (version, name) VALUES (%s, 'newer')", (LATEST + 1,))
    return migrated


@pytest.mark.parametrize(
    "command", [["status"], ["list"], ["migrate"], ["enqueue", "w"], ["worker", "oneapp", "--processes", "1"]]
)
def test_each_command_refuses_a_newer_schema_in_one_line(
    newer: str, command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "oneapp.py").write_text(
        "from kestrel_core import Kestrel\napp = Kestrel()\napp.workflow('noop')(lambda ctx, _: None)\n"
    )
    result = console("--dsn", newer, *command)
    assert result.returncode == 1, result.stdout + result.stderr
    assert LINE in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    with psycopg.connect(newer) as conn:
        assert conn.execute("SELECT max(version) FROM kestrel.schema_migrations").fetchone() == (LATEST + 1,)
