"""Versioned schema migrations, and the schema's functions kept as code.

Two kinds of files build the schema:

- ``migrations/NNNN_name.sql``: tables, indexes, constraints, triggers and data. Each is one
  version, applied once, in order, and recorded in ``schema_migrations``; never edited once
  released. Migrations 0001-0010 also created and re-created functions: that is history, kept
  for existing databases.
- ``schema/functions/<name>.sql``: the current definition of one database function
  (``CREATE OR REPLACE FUNCTION`` and its ``REVOKE ... FROM PUBLIC``). A function changes in its
  file, never in a new migration. The files are applied after the migrations, in the same
  transaction, whenever a file's text differs from the one last applied: ``schema_functions``
  records each text's checksum.

``migrate`` does its work in one transaction under a transaction-scoped advisory lock: many
processes may run it at once, exactly one does the work and the others find nothing left to do.

A migration marked with the line ``-- kestrel: outside transaction`` runs outside that
transaction, one statement at a time: ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` on the hot
``workflow_executions`` table, which a plain ``CREATE INDEX`` would block for writes for the
whole build. The migrations before it commit first, those after it wait until it is recorded.
Its builder holds a session advisory lock of its own; the others poll for it instead of
waiting on it, because a waiting statement holds a snapshot and a concurrent index build
waits for every older snapshot (it would deadlock with its waiters). An interrupted build
leaves an invalid index: the next run drops the schema's invalid indexes before building.
A partitioned table (the history, migration 0022) takes no concurrent build: such a
statement on one is built partition by partition (``_build_partitioned_index``).
That step keeps a session lock, so ``migrate`` runs on a direct connection, not through a
transaction-pooling PgBouncer.

A database newer than this code (a version this code does not know, or a function file this
code holds an older text of) is refused with ``SchemaTooNew``, by ``migrate`` and by every
process that checks the schema (workers, the API, the console): old code must not run on, or
write its functions over, a schema a newer release migrated.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

from kestrel_core.base.errors import ActionRefused, SchemaOutdated, SchemaTooNew
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import check_schema_name, render, render_migration

SQL = statements_beside(__file__)

# A changed function is no version: its (re)application is logged, not returned.
log = logging.getLogger("kestrel.migrate")

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
_FUNCTION_FILE = re.compile(r"^(\w+)\.sql$")
_RELATION = re.compile(r"CREATE (?:UNLOGGED )?(?:TABLE|VIEW|MATERIALIZED VIEW)(?: IF NOT EXISTS)? \{schema\}\.(\w+)")
_PARTITION = re.compile(r"^(\w+)_p\d+$")
OUTSIDE_TRANSACTION = re.compile(r"^-- kestrel: outside transaction\s*$", re.MULTILINE)
# The function files, inside the package: applied after every migration, so that a function
# may use the columns the migrations add.
FUNCTIONS_DIR = ("schema", "functions")

OUTSIDE_POLL_S = 0.2
# ``CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON {schema}.table <definition>``
CONCURRENT_INDEX = re.compile(
    r"^CREATE\s+(?P<unique>UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(?P<name>\w+)\s+"
    r"ON\s+\{schema\}\.(?P<table>\w+)\s+(?P<definition>.+)$",
    re.IGNORECASE | re.DOTALL,
)
# New partitions (ensure_partitions) may appear while the partitions' indexes are built: the
# ones without are looked for again, this many times at most.
PARTITION_ROUNDS = 5


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str

    @property
    def outside_transaction(self) -> bool:
        """Marked to run outside the migration transaction (CREATE INDEX CONCURRENTLY)."""
        return bool(OUTSIDE_TRANSACTION.search(self.text))

    def statements(self) -> list[str]:
        """An outside-transaction migration's statements, one by one (each ends a line with
        ``;``); comment lines dropped. Dollar quoting is refused: no function belongs here."""
        if "$$" in self.text:
            raise ValueError(
                f"migration {self.version} runs outside a transaction: it may not define functions or DO blocks"
            )
        lines = [line for line in self.text.splitlines() if not line.lstrip().startswith("--")]
        parts = re.split(r";[ \t]*$", "\n".join(lines), flags=re.MULTILINE)
        return [part.strip() for part in parts if part.strip()]


@dataclass(frozen=True)
class FunctionFile:
    """``schema/functions/<name>.sql``: the current definition of the function ``name``."""

    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def available() -> list[Migration]:
    """Every migration shipped with this code, in version order."""
    found = []
    for entry in resources.files("kestrel_core.db.migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def function_files() -> list[FunctionFile]:
    """Every function file shipped with this code, by name."""
    folder = resources.files("kestrel_core.db").joinpath(*FUNCTIONS_DIR)
    found = []
    for entry in folder.iterdir():
        match = _FUNCTION_FILE.match(entry.name)
        if match:
            found.append(FunctionFile(match[1], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda f: f.name)


LATEST = available()[-1].version


def migrate(
    conn: psycopg.Connection,
    schema: str,
    *,
    migrations: Sequence[Migration] | None = None,
    functions: Sequence[FunctionFile] | None = None,
) -> list[int]:
    """Bring ``schema`` up to date; return the versions applied now (empty if none).

    ``migrations`` and ``functions`` default to those shipped with this code.
    """
    check_schema_name(schema)
    migrations = available() if migrations is None else sorted(migrations, key=lambda m: m.version)
    functions = function_files() if functions is None else list(functions)
    applied_now: list[int] = []
    while True:
        outside = _apply_in_transaction(conn, schema, migrations, functions, applied_now)
        if outside is None:
            return applied_now
        if _apply_outside_transaction(conn, schema, outside):
            applied_now.append(outside.version)


def _apply_in_transaction(
    conn: psycopg.Connection,
    schema: str,
    migrations: Sequence[Migration],
    functions: Sequence[FunctionFile],
    applied_now: list[int],
) -> Migration | None:
    """Apply the pending migrations up to the first outside-transaction one (returned), or
    all of them and then the changed function files (None returned), in one transaction."""
    with conn.transaction():
        conn.execute(SQL.lock)
        check_schema_fit(conn, schema)
        conn.execute(render(SQL.create_schema, schema))
        conn.execute(render(SQL.create_versions, schema))
        conn.execute(render(SQL.create_functions, schema))
        done = {row[0] for row in conn.execute(render(SQL.applied, schema))}
        _refuse_unknown_versions(schema, done, {m.version for m in migrations})
        for migration in migrations:
            if migration.version in done:
                continue
            if migration.outside_transaction:
                return migration
            conn.execute(render_migration(migration.text, schema))
            conn.execute(render(SQL.record, schema), (migration.version, migration.name))
            applied_now.append(migration.version)
        _apply_functions(conn, schema, functions)
        _ensure_partitions(conn, schema)
    return None


def check_schema_fit(conn: psycopg.Connection, schema: str) -> None:
    """ActionRefused unless ``schema`` is absent or Kestrel's alone: not ``public`` (unless
    Kestrel is already there), no CREATE for other roles, no objects Kestrel did not create."""
    row = conn.execute(SQL.schema_fitness, (schema,)).fetchone()
    if row is None:
        return
    kestrel, others_create, objects = row
    if others_create:
        raise ActionRefused(
            f"refusing to use schema {schema!r} for Kestrel: other roles may create objects in it "
            f"(CREATE granted to {', '.join(others_create)}), and Kestrel's SECURITY DEFINER functions "
            f"resolve names there; revoke that, or use a schema of its own (--schema kestrel)"
        )
    if kestrel:
        return
    if schema == "public" or objects:
        raise ActionRefused(
            f"refusing to install Kestrel into schema {schema!r}: it holds {objects} object(s) Kestrel did not "
            "create, whose privileges Kestrel's grants would change; use a schema of its own (--schema kestrel)"
        )


def kestrel_relations() -> frozenset[str]:
    """The tables and views Kestrel's migrations create (their partitions are named
    ``<table>_p<lo>``: see ``is_kestrel_relation``)."""
    names = {"schema_migrations", "schema_functions"}
    for migration in available():
        names.update(_RELATION.findall(migration.text))
    return frozenset(names)


def is_kestrel_relation(name: str, known: frozenset[str]) -> bool:
    """Whether ``name`` is one of Kestrel's relations, or a partition of one."""
    if name in known:
        return True
    match = _PARTITION.match(name)
    return bool(match and match[1] in known)


def _ensure_partitions(conn: psycopg.Connection, schema: str) -> None:
    """Create the history's id ranges ahead, once the schema has them (a savepoint: a lock
    not had within the function's lock_timeout is logged, and left to the workers' upkeep)."""
    row = conn.execute(
        SQL.has_ensure_partitions, (f"{schema}.ensure_partitions(integer)", f"{schema}.history_settings")
    ).fetchone()
    if row != (True,):
        return
    try:
        with conn.transaction():
            conn.execute(render(SQL.ensure_partitions, schema))
    except psycopg.errors.LockNotAvailable as exc:
        log.warning("event=ensure_partitions_skipped schema=%s error=%r", schema, str(exc).strip())


def _refuse_unknown_versions(schema: str, done: set[int], known: set[int]) -> None:
    unknown = done - known
    if not unknown:
        return
    latest = max(known, default=0)
    if max(done) > latest:
        raise SchemaTooNew(too_new_message(schema, max(done), latest))
    raise SchemaTooNew(
        f"the Kestrel schema {schema!r} has migration(s) "
        f"{', '.join(map(str, sorted(unknown)))} that this code does not know: upgrade kestrel"
    )


def _apply_functions(conn: psycopg.Connection, schema: str, functions: Sequence[FunctionFile]) -> None:
    """(Re)apply each function file whose text is not the latest one applied."""
    latest: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    for name, checksum in conn.execute(render(SQL.functions_applied, schema)):
        latest[name] = checksum
        seen.add((name, checksum))
    for function in functions:
        checksum = function.checksum
        if latest.get(function.name) == checksum:
            continue
        if (function.name, checksum) in seen:
            raise SchemaTooNew(
                f"the Kestrel schema {schema!r} holds a newer definition of the function "
                f"{function.name}() than this code's: upgrade kestrel"
            )
        conn.execute(render_migration(function.text, schema))
        conn.execute(render(SQL.record_function, schema), (function.name, checksum))
        log.info("event=function_applied schema=%s function=%s", schema, function.name)


def _apply_outside_transaction(conn: psycopg.Connection, schema: str, migration: Migration) -> bool:
    """Run ``migration`` statement by statement in autocommit, unless another process has
    meanwhile; True if this call applied it."""
    if not conn.autocommit:
        raise ValueError(
            f"migration {migration.version} ({migration.name}) runs outside a "
            "transaction: migrate needs an autocommit connection"
        )
    statements = migration.statements()
    while conn.execute(SQL.try_outside_lock).fetchone() != (True,):
        time.sleep(OUTSIDE_POLL_S)
    try:
        if conn.execute(render(SQL.is_applied, schema), (migration.version,)).fetchone():
            return False
        for (index,) in conn.execute(SQL.invalid_indexes, (schema,)).fetchall():
            conn.execute(_drop_index(schema, index))
        for statement in statements:
            index = CONCURRENT_INDEX.match(statement)
            if index and _is_partitioned(conn, schema, index["table"]):
                _build_partitioned_index(conn, schema, index)
            else:
                conn.execute(render_migration(statement, schema))
        conn.execute(render(SQL.record, schema), (migration.version, migration.name))
        return True
    finally:
        conn.execute(SQL.outside_unlock)


def _is_partitioned(conn: psycopg.Connection, schema: str, table: str) -> bool:
    row = conn.execute(SQL.is_partitioned, (sql.Identifier(schema, table).as_string(conn),)).fetchone()
    return bool(row and row[0])


def _build_partitioned_index(conn: psycopg.Connection, schema: str, index: re.Match[str]) -> None:
    """``CREATE INDEX CONCURRENTLY`` of a partitioned table, which PostgreSQL refuses: each
    partition's index is built concurrently (writes go on), then the parent's index is created
    ``ON ONLY`` (a brief SHARE lock on the parent alone, under parent_lock_timeout) and each
    partition's is attached; the parent's becomes valid with the last one. Partitions created
    later get it from the parent. Each step is idempotent: an interrupted run is resumed."""
    name, table = index["name"], index["table"]
    parts: dict[str, sql.Composable] = {
        "unique": sql.SQL("UNIQUE " if index["unique"] else ""),
        "definition": render_migration(index["definition"], schema),
    }
    parent_name = sql.Identifier(schema, name).as_string(conn)
    parent = {"table": sql.Identifier(schema, table).as_string(conn), "index": parent_name}
    suffix = name[len(table) :] if name.startswith(table) else f"_{name}"
    for _ in range(PARTITION_ROUNDS):
        partitions = [r[0] for r in conn.execute(SQL.partitions_without_index, parent).fetchall()]
        for partition in partitions:
            conn.execute(
                sql.SQL(SQL.partition_index).format(
                    index=sql.Identifier(partition + suffix), table=sql.Identifier(schema, partition), **parts
                )
            )
        conn.execute(SQL.parent_lock_timeout)
        try:
            conn.execute(
                sql.SQL(SQL.parent_index).format(
                    index=sql.Identifier(name), table=sql.Identifier(schema, table), **parts
                )
            )
        finally:
            conn.execute(SQL.reset_lock_timeout)
        for partition in partitions:
            conn.execute(
                sql.SQL(SQL.attach_index).format(
                    parent=sql.Identifier(schema, name), child=sql.Identifier(schema, partition + suffix)
                )
            )
        if conn.execute(SQL.index_is_valid, (parent_name,)).fetchone() == (True,):
            return
    raise RuntimeError(f"the index {name} of {schema}.{table} is still missing on some partitions: run migrate again")


def _drop_index(schema: str, index: str) -> sql.Composed:
    return sql.SQL(SQL.drop_index_concurrently).format(index=sql.Identifier(schema, index))


def schema_version(conn: psycopg.Connection, schema: str) -> int | None:
    """The version the database is at, or None when the schema was never migrated."""
    exists = conn.execute(SQL.versions_exist, (f'"{schema}".schema_migrations',)).fetchone()
    if not (exists and exists[0]):
        return None
    row = conn.execute(render(SQL.current_version, schema)).fetchone()
    return row[0] if row else 0


def too_new_message(schema: str, version: int, latest: int) -> str:
    return f"the Kestrel schema {schema!r} is at version {version}, this code knows up to {latest}: upgrade kestrel"


def check_current(conn: psycopg.Connection, schema: str) -> None:
    """Raise SchemaOutdated unless the schema is at the version this code expects
    (SchemaTooNew, a kind of it, when a newer release migrated it)."""
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
    if version > LATEST:
        raise SchemaTooNew(too_new_message(schema, version, LATEST))
