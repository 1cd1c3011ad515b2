"""Build the guard's function allowlist from a PostgreSQL catalog; run by hand, output shipped.

    python kestrel_console/adhoc/allowlist_build.py "host=127.0.0.1 user=postgres"

writes, next to this file:

- ``allowed_functions.txt``: the functions an ad-hoc query may name. A name is on it when every
  ``pg_catalog`` function of that name (every overload) is IMMUTABLE or STABLE and is a plain
  function, aggregate or window function, minus the reviewed exclusions below (functions that
  run SQL given as text, read the server's files, take locks, change settings, signal sessions,
  touch replication, large objects, sequences, notifications, transaction ids); plus a short
  reviewed list of VOLATILE functions that only read or wait (``REVIEWED_VOLATILE``).
- ``catalog_functions.txt``: every ``pg_catalog`` function name. The guard refuses an
  attribute reference ``x.f`` / ``(x).f`` whose ``f`` is a catalog function not on the
  allowlist: Postgres reads it as the call ``f(x)``.
- ``allowed_operators.txt``: the operator names an ad-hoc query may use: ``pg_catalog``
  operators whose function is on the allowlist, for every operator of that name.
- ``catalog_types.txt``: every ``pg_catalog`` type name; a query may name no other type.

Run it against PostgreSQL 15 (the version Kestrel is tested on), review the diff of the two
files, commit them. Functions outside ``pg_catalog`` (extensions, the Kestrel schema's own,
users') are never allowed: the guard refuses every name that is not on the list.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import psycopg

from kestrel_core.db import statements_beside

SQL = statements_beside(__file__)

HERE = Path(__file__).resolve().parent
ALLOWED_FILE = HERE / "allowed_functions.txt"
CATALOG_FILE = HERE / "catalog_functions.txt"
OPERATORS_FILE = HERE / "allowed_operators.txt"
TYPES_FILE = HERE / "catalog_types.txt"


# Reviewed exclusions: (why, pattern). A name matching any pattern is never allowed, whatever
# its volatility says.
EXCLUDED: tuple[tuple[str, str], ...] = (
    ("runs SQL given as text", r"^(query|cursor|table|schema|database)_to_xml|^ts_stat$|^ts_rewrite$"),
    (
        "reads the server's files or directories",
        r"^pg_(read_file|read_binary_file|stat_file|ls_|file_|current_logfile|hba_file_rules"
        r"|ident_file_mappings|show_all_file_settings|tablespace_location|config$)",
    ),
    # Named one by one: a bare "lock" also caught clock_timestamp and the block counters.
    (
        "takes or inspects locks",
        r"^pg_(try_)?advisory_|^pg_(safe_snapshot_)?blocking_pids$|^pg_lock_status$"
        r"|^pg_isolation_test_session_is_blocked$",
    ),
    ("changes settings", r"^set_config$|^pg_reload_conf$|^pg_settings_"),
    (
        "signals or inspects other sessions",
        r"^pg_(terminate|cancel|signal)_backend$|^pg_log_backend_memory_contexts$|^pg_stat_reset",
    ),
    (
        "administers replication, WAL or backups",
        r"replication|_slot|^pg_(create|copy|drop)_|backup|promote|wal_replay|switch_wal"
        r"|logical_emit|^pg_import_system_collations$|^pg_rotate_logfile",
    ),
    (
        "works on large objects",
        r"^lo_|^lo(read|write|open|close|creat|import|export|unlink|tell"
        r"|tell64|lseek|lseek64|truncate|truncate64|get|put|from_bytea)$",
    ),
    ("changes a sequence", r"^(nextval|setval)$"),
    ("sends notifications", r"^pg_notify$"),
    ("assigns a transaction id", r"^(txid_current|pg_current_xact_id)$"),
    ("connects elsewhere", r"^dblink"),
)

# VOLATILE functions that only read or wait; reviewed one by one.
REVIEWED_VOLATILE = (
    "pg_sleep",
    "pg_sleep_for",
    "pg_sleep_until",  # bounded by statement_timeout
    "currval",
    "lastval",  # read this session's sequence state
    "random",
    "gen_random_uuid",
    "clock_timestamp",
    "timeofday",
    "pg_relation_size",
    "pg_total_relation_size",
    "pg_table_size",
    "pg_indexes_size",
    "pg_database_size",
    "pg_tablespace_size",
)


def excluded(name: str) -> str | None:
    """Why ``name`` is excluded by review, or None."""
    for why, pattern in EXCLUDED:
        if re.search(pattern, name):
            return why
    return None


def build(conn: psycopg.Connection) -> tuple[list[str], list[str], list[str], list[str], str]:
    """(allowed function names, all catalog function names, allowed operators, catalog types,
    server version) from ``conn``'s catalog."""
    row = conn.execute(SQL.version).fetchone()
    assert row is not None  # a FROM-less SELECT returns one row
    version = row[0]
    types = [name for (name,) in conn.execute(SQL.types)]
    rows = conn.execute(SQL.catalog).fetchall()
    catalog = [name for name, _, _ in rows]
    allowed = [
        name
        for name, safe_kind, takes_sql in rows
        if (safe_kind or name in REVIEWED_VOLATILE) and not takes_sql and excluded(name) is None
    ]
    allowed_set = set(allowed)
    operators = [name for name, functions in conn.execute(SQL.operators) if set(functions) <= allowed_set]
    return sorted(allowed), sorted(catalog), sorted(operators), sorted(types), version


ALLOWED_HOW = (
    "pg_catalog functions whose every overload is IMMUTABLE or STABLE (plus the reviewed\n"
    "# REVIEWED_VOLATILE), minus the reviewed EXCLUDED patterns and functions taking SQL as\n"
    "# text."
)
CATALOG_HOW = "every function name in pg_catalog (SELECT DISTINCT proname)."
OPERATORS_HOW = "pg_catalog operators whose functions are all on allowed_functions.txt."
TYPES_HOW = "every type name in pg_catalog (SELECT typname FROM pg_type)."


def header(what: str, how: str, version: str) -> str:
    return (
        f"# {what}\n"
        f"# Generated by kestrel_console/adhoc/allowlist_build.py from pg_proc of PostgreSQL {version}:\n"
        f"# {how}\n"
        "# Do not edit by hand: change the script, rerun it, review the diff.\n"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python kestrel_console/adhoc/allowlist_build.py DSN", file=sys.stderr)
        return 2
    with psycopg.connect(argv[0], autocommit=True) as conn:
        allowed, catalog, operators, types, version = build(conn)
    if not version.startswith("15"):
        print(f"warning: built from PostgreSQL {version}, Kestrel is tested on 15", file=sys.stderr)
    ALLOWED_FILE.write_text(
        header("Functions an ad-hoc query may call, one name per line.", ALLOWED_HOW, version)
        + "\n".join(allowed)
        + "\n"
    )
    CATALOG_FILE.write_text(
        header("Every pg_catalog function name (for attribute notation).", CATALOG_HOW, version)
        + "\n".join(catalog)
        + "\n"
    )
    OPERATORS_FILE.write_text(
        header("Operators an ad-hoc query may use, one per line.", OPERATORS_HOW, version) + "\n".join(operators) + "\n"
    )
    TYPES_FILE.write_text(
        header("Every pg_catalog type name (a query may name no other).", TYPES_HOW, version) + "\n".join(types) + "\n"
    )
    print(f"{len(allowed)} allowed of {len(catalog)} catalog function names (PostgreSQL {version})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
