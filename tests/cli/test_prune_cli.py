"""`kestrel-console prune`: dry run, audit under the operator's name, bad usage (moved from
tests/core/test_prune.py: the engine's tests do not import the console, issue 11)."""

from __future__ import annotations

import psycopg
import pytest

from tests.cli.script import console
from tests.core.test_prune import count, seed_finished


def cli_run(dsn: str, *args: str):
    return console("--operator", "dora", *args, dsn=dsn)


def test_cli_dry_run_prints_what_would_go_and_deletes_nothing(dsn: str, db: psycopg.Connection) -> None:
    seed_finished(db, 2, "40 days")
    result = cli_run(dsn, "prune", "--older-than", "30d", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "dry run: 6 finished execution(s)" in result.stdout
    assert "old" in result.stdout and "cancelled" in result.stdout
    assert count(db, "workflow_executions") == 6 and count(db, "operator_actions") == 0


def test_cli_prunes_and_audits_under_the_operator_name(dsn: str, db: psycopg.Connection) -> None:
    seed_finished(db, 2, "40 days")
    seed_finished(db, 1, "1 hour")
    result = cli_run(dsn, "prune", "--older-than", "30d", "--batch-size", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pruned 6 finished execution(s)" in result.stdout
    assert count(db, "workflow_executions") == 3
    assert db.execute("SELECT DISTINCT actor, action FROM operator_actions").fetchall() == [("dora", "prune")]
    again = cli_run(dsn, "prune", "--older-than", "30m")
    assert again.returncode == 0 and "pruned 3" in again.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["prune"],
        ["prune", "--older-than", "30"],
        ["prune", "--older-than", "0d"],
        ["prune", "--older-than", "30d", "--batch-size", "0"],
    ],
)
def test_cli_bad_usage_exits_2_and_deletes_nothing(dsn: str, db: psycopg.Connection, args: list[str]) -> None:
    seed_finished(db, 1, "40 days")
    result = cli_run(dsn, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert count(db, "workflow_executions") == 3


def test_cli_on_an_unmigrated_database_says_to_migrate(database: str) -> None:
    result = console("--schema", "never_migrated", "prune", "--older-than", "1d", dsn=database)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "migrate" in result.stderr


def test_cli_shows_progress_on_long_work(dsn: str, db: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    from kestrel_console.cli import prune_command

    monkeypatch.setattr(prune_command, "PROGRESS_EVERY_S", 0.0)  # every batch counts as long
    seed_finished(db, 2, "40 days")
    result = cli_run(dsn, "prune", "--older-than", "30d", "--batch-size", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split(" deleted")[0] for line in result.stderr.splitlines()] == ["... 2", "... 4", "... 6", "... 6"]
    assert "pruned 6" in result.stdout
