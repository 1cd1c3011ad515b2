"""The schema ``migrate`` builds is the committed snapshot, on a fresh database and on one that
an older release migrated before functions were files (issue 19).

When a deliberate change makes these fail, regenerate the snapshot and commit it with the
change (the diff is the review): ``.venv/bin/python -m tests.core.schema_snapshot``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.db.migrate import migrate
from kestrel_core.db.roles import RoleNames
from tests.conftest import create_database, drop_at_the_end
from tests.core.schema_snapshot import MADE_ON, SCHEMA, SNAPSHOT, build, snapshot

REGENERATE = "regenerate it with `.venv/bin/python -m tests.core.schema_snapshot` and commit the diff"


@pytest.fixture
def empty_database() -> Iterator[str]:
    dsn = create_database("kestrel_snap")
    try:
        yield dsn
    finally:
        drop_at_the_end(dsn)


def _same_as_committed(text: str) -> None:
    committed = SNAPSHOT.read_text()
    made_on, built_on = committed.split("\n", 1)[0], text.split("\n", 1)[0]
    if made_on != built_on:  # CI's server is the snapshot's; another major deparses differently
        pytest.skip(f"the snapshot was {made_on}, this server is {built_on.removeprefix(MADE_ON)}")
    if text != committed:
        diff = "\n".join(
            difflib.unified_diff(
                committed.splitlines(), text.splitlines(), "committed snapshot", "schema built now", lineterm=""
            )
        )
        pytest.fail(
            f"the schema drifted from {SNAPSHOT.name}; if that is on purpose, {REGENERATE}:\n{diff}", pytrace=False
        )


def test_a_fresh_schema_is_the_committed_snapshot(empty_database: str) -> None:
    _same_as_committed(build(empty_database))


def test_a_schema_from_before_the_function_files_upgrades_to_the_snapshot(empty_database: str) -> None:
    # What an older release left: every migration, the functions as the migrations wrote them,
    # no record of function files.
    with psycopg.connect(empty_database, autocommit=True) as conn:
        migrate(conn, SCHEMA, functions=[])
        conn.execute("DROP TABLE kestrel.schema_functions")
    with Kestrel(empty_database, schema=SCHEMA) as app:
        assert app.migrate(roles=RoleNames()) == []
    with psycopg.connect(empty_database, autocommit=True) as conn:
        _same_as_committed(snapshot(conn))


def test_the_snapshot_sees_a_changed_function_body_column_and_grant(empty_database: str) -> None:
    before = build(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION kestrel.notify_channel() RETURNS text LANGUAGE sql "
            "STABLE SET search_path = kestrel, pg_temp AS $$ SELECT 'drifted' $$"
        )
        conn.execute("ALTER TABLE kestrel.workers ADD COLUMN drifted int")
        conn.execute("GRANT SELECT ON kestrel.operator_actions TO kestrel_worker")
        after = snapshot(conn)
    changed = {line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:2] in ("+ ", "- ")}
    assert "+   column drifted integer" in changed
    assert any("'drifted'" in line for line in changed)
    assert any(line.startswith("+   acl ") and "kestrel_worker=r/" in line for line in changed)
