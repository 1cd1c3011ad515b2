"""`list --workflow` matches a prefix of the workflow name (the console docs' `workflow:remediate`
finds remediate-incident), and a name nothing starts with says which names exist."""

from __future__ import annotations

import json

import psycopg

from .script import console

NAMES = ["remediate-incident", "remediate-incident", "ci-pipeline", "provision-resource", "a_b%c"]


def insert(db: psycopg.Connection, names: list[str]) -> list[int]:
    return [
        db.execute("INSERT INTO workflow_executions (workflow_name) VALUES (%s) RETURNING id", (name,)).fetchone()[0]
        for name in names
    ]


def listed(dsn: str, *args: str) -> list[tuple[int, str]]:
    done = console("list", "--format", "json", *args, dsn=dsn)
    assert done.returncode == 0, done.stderr
    return [(row["id"], row["workflow_name"]) for row in json.loads(done.stdout)]


def test_workflow_filter_matches_a_prefix(dsn: str, db: psycopg.Connection) -> None:
    ids = insert(db, NAMES)
    assert listed(dsn, "--workflow", "remediate") == [(ids[1], "remediate-incident"), (ids[0], "remediate-incident")]
    assert listed(dsn, "--workflow", "ci") == [(ids[2], "ci-pipeline")]
    assert listed(dsn, "--workflow", "remediate-incident") == [
        (ids[1], "remediate-incident"),
        (ids[0], "remediate-incident"),
    ]
    # Case-sensitive, and % and _ are literal characters, not wildcards.
    assert [i for i, _ in listed(dsn, "--workflow", "a_b%")] == [ids[4]]
    db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('axbyc')")
    assert [i for i, _ in listed(dsn, "--workflow", "a_b")] == [ids[4]]
    # A known name with no row in the asked status is an empty list, not an error.
    assert listed(dsn, "--workflow", "ci", "--status", "error") == []


def test_a_workflow_nothing_starts_with_suggests_the_closest(dsn: str, db: psycopg.Connection) -> None:
    insert(db, NAMES)
    for typed in ("incident", "Remediate", "remediate-incidnet"):
        done = console("list", "--workflow", typed, dsn=dsn)
        assert done.returncode == 1, done.stdout
        assert done.stdout == ""
        assert done.stderr.strip() == f"error: no workflow named {typed!r}; did you mean remediate-incident?"
    done = console("list", "--workflow", "zzz", "--format", "json", dsn=dsn)
    assert done.returncode == 1 and done.stdout == ""
    assert (
        "no workflow named 'zzz'; known workflows: a_b%c, ci-pipeline, provision-resource, remediate-incident"
        in done.stderr
    )


def test_a_workflow_only_a_worker_registered_is_known(dsn: str, db: psycopg.Connection) -> None:
    db.execute(
        "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency) "
        "VALUES ('w1', 'h', 1, ARRAY['nightly-report'], 1)"
    )
    done = console("list", "--workflow", "nightly", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert "no executions match" in done.stdout
