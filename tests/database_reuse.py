"""Module databases handed on to the next test module of the same process, when nothing but
rows changed in them.

Each test module gets its own copy of the run's template database. Creating one copies the
template through the WAL (~10 MB, ~100 ms of server CPU) and dropping one forces a checkpoint:
~170 of each in a run. Most modules only write rows, which the tables' reset empties anyway.
So when a module ends, its database is reset (rows, the history's ranges a test added) and
compared with what the copy was when it was made: its schema objects, their grants, settings
and the tables' planner statistics (not an index's pages, which a TRUNCATE changes, as it does
between two tests of one module), and the rows of the tables the reset leaves alone (the
migration ledger, the history's ranges). Equal, the next module of this process gets it;
different in anything (a module created a table or a function, changed a grant or a setting,
analyzed a table, marked the schema newer), it is dropped as before.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

# One row per schema object and setting of the database, outside the system's own schemas.
# Sessions have ended when it runs: the temporary schemas a session made (pg_temp_N and its
# pg_toast_temp_N, which the server keeps for the next session in that slot) are empty, left out.
OBJECTS = """
SELECT format('rel %s.%s %s %s %s %s', n.nspname, c.relname, c.relkind, c.relacl, c.relrowsecurity,
              -- a table's statistics (TRUNCATE resets them, ANALYZE sets them), not an index's
              CASE WHEN c.relkind NOT IN ('i', 'I') THEN format('%s %s', c.relpages, c.reltuples) END)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT format('stats %s %s', s.starelid::regclass, s.staattnum) FROM pg_statistic s
  JOIN pg_class c ON c.oid = s.starelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT format('col %s %s %s %s %s %s', a.attrelid::regclass, a.attname, a.atttypid::regtype, a.attnotnull,
              a.attisdropped, pg_get_expr(d.adbin, d.adrelid))
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND a.attnum > 0
UNION ALL
SELECT format('con %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint
 WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
UNION ALL
SELECT format('fn %s.%s(%s) %s %s %s', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid),
              md5(p.prosrc), p.proacl, p.proconfig)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT format('trg %s %s %s', tgrelid::regclass, tgname, tgenabled) FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT format('rule %s %s', ev_class::regclass, rulename) FROM pg_rewrite
 WHERE ev_class >= 16384 AND rulename <> '_RETURN'
UNION ALL
SELECT format('policy %s %s', polrelid::regclass, polname) FROM pg_policy
UNION ALL
SELECT format('type %s.%s', n.nspname, t.typname) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND t.typrelid = 0
UNION ALL
SELECT format('ns %s %s', nspname, nspacl) FROM pg_namespace WHERE nspname !~ '^pg_(toast_)?temp_'
UNION ALL
SELECT format('ext %s %s', extname, extversion) FROM pg_extension
UNION ALL
SELECT format('seq %s.%s %s', schemaname, sequencename, last_value) FROM pg_sequences
UNION ALL
SELECT format('acl %s %s', defaclrole, defaclacl) FROM pg_default_acl
UNION ALL
SELECT format('evt %s', evtname) FROM pg_event_trigger
UNION ALL
SELECT format('db %s %s', datacl, datallowconn) FROM pg_database WHERE datname = current_database()
UNION ALL
SELECT format('set %s', setconfig) FROM pg_db_role_setting
 WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
UNION ALL
SELECT format('lo %s', count(*)) FROM pg_largeobject_metadata
UNION ALL
SELECT format('xact %s', gid) FROM pg_prepared_xacts WHERE database = current_database()
"""

# The schema's tables whose rows the reset between tests leaves alone (not partitions).
KEPT_TABLES = """
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'kestrel'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
   AND c.relname <> ALL(%s)
 ORDER BY 1
"""
TABLE_ROWS = sql.SQL(
    "SELECT {name} || ' ' || coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM {table} t"
)


def state(conn: psycopg.Connection, reset_tables: list[str]) -> list[str]:
    """What must be equal for a database to be handed on: its objects and settings, and the
    rows of the Kestrel tables the reset does not empty."""
    rows = sorted(line for (line,) in conn.execute(OBJECTS))
    for (table,) in conn.execute(KEPT_TABLES, (reset_tables,)).fetchall():
        query = TABLE_ROWS.format(name=sql.Literal(table), table=sql.Identifier("kestrel", table))
        rows.append(conn.execute(query).fetchone()[0])
    return rows
