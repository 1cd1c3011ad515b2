"""Who acts: `--operator` after an acting command's name, before it, or `$KESTREL_OPERATOR`."""

from __future__ import annotations

import psycopg
import pytest

from tests.cli.script import console
from tests.seed import waiting_on_gate


def actors(db: psycopg.Connection) -> list[tuple[str, str]]:
    return db.execute("SELECT action, actor FROM operator_actions ORDER BY id").fetchall()


def test_operator_after_the_command_name_is_accepted_and_recorded(dsn: str, db: psycopg.Connection) -> None:
    first, second, third = (waiting_on_gate(db) for _ in range(3))
    done = console(
        "approve",
        str(first),
        "approve-fix",
        "--comment",
        "lgtm",
        "--operator",
        "bob",
        env={"KESTREL_OPERATOR": "ignored"},
        dsn=dsn,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "as bob" in done.stdout
    # The command's own --operator wins over the global one.
    done = console("--operator", "global", "reject", str(second), "approve-fix", "--operator", "carol", dsn=dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    done = console("cancel", str(third), "--operator", "dave", dsn=dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    done = console("requeue", str(third), "--operator", "erin", dsn=dsn)
    assert done.returncode == 0, done.stdout + done.stderr
    assert actors(db) == [("approve", "bob"), ("reject", "carol"), ("cancel", "dave"), ("requeue", "erin")]


def test_kestrel_operator_environment_variable_names_the_actor(dsn: str, db: psycopg.Connection) -> None:
    eid = waiting_on_gate(db)
    done = console(
        "approve", str(eid), "approve-fix", env={"KESTREL_OPERATOR": "frank", "USER": "someone-else"}, dsn=dsn
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert actors(db) == [("approve", "frank")]


@pytest.mark.parametrize(
    "command",
    [
        ["approve", "1", "gate"],
        ["reject", "1", "gate"],
        ["cancel", "1"],
        ["requeue", "1"],
        ["prune", "--older-than", "30d"],
    ],
)
def test_every_acting_command_documents_operator(command: list[str]) -> None:
    shown = console(command[0], "--help")
    assert shown.returncode == 0
    assert "--operator" in shown.stdout and "KESTREL_OPERATOR" in shown.stdout


def test_an_empty_operator_is_a_usage_error_and_changes_nothing(dsn: str, db: psycopg.Connection) -> None:
    eid = waiting_on_gate(db)
    done = console("approve", str(eid), "approve-fix", "--operator", " ", dsn=dsn)
    assert done.returncode == 2
    assert "--operator" in done.stderr
    assert actors(db) == []
