"""The schema as the catalog sees it, as normalised text: tables, columns, constraints, indexes,
triggers, sequences, functions with their bodies, and every grant (issue 19).

``tests/core/schema_snapshot.txt`` is this text for a schema built by ``migrate`` (migrations,
then function files, then the default roles' grants); tests/core/test_schema_snapshot.py
rebuilds it and fails with a diff when anything drifts. After a deliberate schema change,
regenerate it and review the diff with the change:

    .venv/bin/python -m tests.core.schema_snapshot

The role that ran ``migrate`` (it owns everything and appears in every grant) is written
``<owner>``, so the text does not depend on which admin login built it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg

from kestrel_core import Kestrel
from kestrel_core.db.roles import RoleNames

SNAPSHOT = Path(__file__).with_name("schema_snapshot.txt")
SCHEMA = "kestrel"
OWNER = "<owner>"
MADE_ON = "made on PostgreSQL "

# Names print schema-qualified whatever the caller's search_path: the text is the same for
# every build.
SET_PATH = "SET search_path = pg_catalog"
SCHEMA_ACL = """
SELECT n.nspname, n.nspacl::text[] FROM pg_namespace n WHERE n.nspname = %(schema)s
"""
RELATIONS = """
SELECT c.oid, c.relkind::text, c.relname, coalesce(array_to_string(c.reloptions, ', '), ''),
       c.relacl::text[]
  FROM pg_class c
 WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
 ORDER BY c.relname
"""
COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity::text, a.attgenerated::text
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""
CONSTRAINTS = """
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = %(oid)s ORDER BY conname
"""
INDEXES = """
SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = %(oid)s ORDER BY c.relname
"""
TRIGGERS = """
SELECT pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = %(oid)s AND NOT tgisinternal ORDER BY tgname
"""
VIEW = "SELECT pg_get_viewdef(%(oid)s::oid)"
FUNCTIONS = """
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid), p.proacl::text[]
  FROM pg_proc p
 WHERE p.pronamespace = %(schema)s::regnamespace
 ORDER BY 1
"""
OWNER_NAME = "SELECT current_user"
SERVER_MAJOR = "SELECT current_setting('server_version_num')::int / 10000"

KINDS = {"r": "table", "p": "partitioned table", "v": "view", "m": "materialized view", "S": "sequence"}


def snapshot(conn: psycopg.Connection, schema: str = SCHEMA) -> str:
    """The normalised text of ``schema`` on ``conn``."""
    conn.execute(SET_PATH)
    owner = conn.execute(OWNER_NAME).fetchone()[0]

    def acl(items: list[str] | None) -> str:
        # Sorted after the owner's name is replaced: the order is the same whoever built it.
        named = (item.replace(f"{owner}=", f"{OWNER}=").replace(f"/{owner}", f"/{OWNER}") for item in items or [])
        return " ".join(sorted(named)) or "-"

    name, schema_acl = conn.execute(SCHEMA_ACL, {"schema": schema}).fetchone()
    # The catalog's deparsed text may differ between major versions: say which one made it.
    major = conn.execute(SERVER_MAJOR).fetchone()[0]
    out = [f"{MADE_ON}{major}", "", f"schema {name}", f"  acl {acl(schema_acl)}"]
    for oid, kind, name, options, relacl in conn.execute(RELATIONS, {"schema": schema}).fetchall():
        out.append("")
        out.append(f"{KINDS[kind]} {name}" + (f" ({options})" if options else ""))
        out.append(f"  acl {acl(relacl)}")
        if kind == "S":
            continue
        if kind in ("v", "m"):
            out.append("  as " + conn.execute(VIEW, {"oid": oid}).fetchone()[0].strip())
        for column, type_, not_null, default, identity, generated in conn.execute(COLUMNS, {"oid": oid}):
            out.append(
                f"  column {column} {type_}"
                + (" NOT NULL" if not_null else "")
                + (f" DEFAULT {default}" if default and not generated else "")
                + (f" GENERATED ALWAYS AS ({default}) STORED" if generated else "")
                + ({"a": " IDENTITY ALWAYS", "d": " IDENTITY BY DEFAULT"}.get(identity, ""))
            )
        for constraint, definition in conn.execute(CONSTRAINTS, {"oid": oid}):
            out.append(f"  constraint {constraint} {definition}")
        for definition, valid in conn.execute(INDEXES, {"oid": oid}):
            out.append(f"  {definition}" + ("" if valid else " -- INVALID"))
        for (definition,) in conn.execute(TRIGGERS, {"oid": oid}):
            out.append(f"  {definition}")
    for signature, definition, proacl in conn.execute(FUNCTIONS, {"schema": schema}).fetchall():
        out.append("")
        out.append(f"function {signature}")
        out.append(f"  acl {acl(proacl)}")
        out.extend("  " + line if line else "" for line in definition.rstrip().splitlines())
    return "\n".join(out) + "\n"


def build(dsn: str) -> str:
    """Migrate ``dsn`` (an empty database) the way users do and return its snapshot."""
    with Kestrel(dsn, schema=SCHEMA) as app:
        app.migrate(roles=RoleNames())
    with psycopg.connect(dsn, autocommit=True) as conn:
        return snapshot(conn)


def main() -> int:
    """Rewrite the committed snapshot from a fresh database on the test server."""
    from tests.conftest import create_database, drop_database

    dsn = create_database("kestrel_snapshot")
    try:
        text = build(dsn)
    finally:
        drop_database(dsn)
    SNAPSHOT.write_text(text)
    print(f"wrote {SNAPSHOT.name} ({len(text.splitlines())} lines): review `git diff` with your change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
