"""Versioned schema migrations.

Each ``migrations/NNNN_name.sql`` file is one version. ``migrate`` applies the missing ones in
order, in one transaction, under a transaction-scoped advisory lock: many processes may run it
at once, exactly one does the work and the others find nothing left to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg

from .errors import SchemaOutdated
from .statements import check_schema_name, render, render_migration

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")

CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
CREATE_VERSIONS = """
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
# One lock for every schema in the database: migrations are rare, so no need to be finer.
LOCK = "SELECT pg_advisory_xact_lock(hashtext('kestrel.migrate'))"
APPLIED = "SELECT version FROM {schema}.schema_migrations"
RECORD = "INSERT INTO {schema}.schema_migrations (version, name) VALUES (%s, %s)"
VERSIONS_EXIST = "SELECT to_regclass(%s) IS NOT NULL"
CURRENT_VERSION = "SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str


def available() -> list[Migration]:
    """Every migration shipped with this code, in version order."""
    found = []
    for entry in resources.files("kestrel_core.migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


LATEST = available()[-1].version


def migrate(conn: psycopg.Connection, schema: str) -> list[int]:
    """Bring ``schema`` up to date; return the versions applied now (empty if none)."""
    check_schema_name(schema)
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute(LOCK)
        conn.execute(render(CREATE_SCHEMA, schema))
        conn.execute(render(CREATE_VERSIONS, schema))
        done = {row[0] for row in conn.execute(render(APPLIED, schema))}
        for migration in available():
            if migration.version in done:
                continue
            conn.execute(render_migration(migration.text, schema))
            conn.execute(render(RECORD, schema), (migration.version, migration.name))
            applied_now.append(migration.version)
    return applied_now


def schema_version(conn: psycopg.Connection, schema: str) -> int | None:
    """The version the database is at, or None when the schema was never migrated."""
    exists = conn.execute(VERSIONS_EXIST, (f'"{schema}".schema_migrations',)).fetchone()
    if not (exists and exists[0]):
        return None
    row = conn.execute(render(CURRENT_VERSION, schema)).fetchone()
    return row[0] if row else 0


def check_current(conn: psycopg.Connection, schema: str) -> None:
    """Raise SchemaOutdated unless the schema is at the version this code expects."""
    version = schema_version(conn, schema)
    if version is None:
        raise SchemaOutdated(
            f"the Kestrel schema {schema!r} does not exist in this database: "
            "run `kestrel-console migrate` (or Kestrel.migrate()) first"
        )
    if version < LATEST:
        raise SchemaOutdated(
            f"the Kestrel schema {schema!r} is at version {version}, this code needs "
            f"{LATEST}: run `kestrel-console migrate` to upgrade it"
        )
