"""The migration to the partitioned history (0020-0022) on a populated schema at version 19:
every row kept as it was, nothing rewritten (today's tables and indexes become the first
partition's), keys still unique, triggers firing once, ids going on past the highest."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_core.db.migrate import FunctionFile, available, function_files, migrate
from tests.core.schema_history import created_after
from tests.core.test_buckets import BUCKET_FUNCTIONS

SCHEMA = "part_mig"
TABLES = {
    "workflow_executions": "id",
    "operation_outputs": "execution_id, step_id",
    "step_attempts": "id",
    "workflow_waits": "execution_id, step_id",
}
# Executions in every status, keyed by a user key (every third), an engine key (every fifth,
# not already keyed) or none, each with checkpoints, attempts and a wait.
SEED = """
WITH e AS (
    INSERT INTO workflow_executions (workflow_name, status, input, output, idempotency_key, engine_key,
                                     started_at, finished_at, owner_id, lease_expires)
    SELECT 'w' || (g %% 4), s,
           jsonb_build_object('n', g), CASE WHEN s = 'success' THEN to_jsonb(g) END,
           CASE WHEN g %% 3 = 0 THEN 'user-' || g END,
           CASE WHEN g %% 5 = 0 AND g %% 3 <> 0 THEN 'child:' || g || ':s' END,
           CASE WHEN s <> 'enqueued' THEN now() END,
           CASE WHEN s IN ('success', 'error', 'cancelled') THEN now() - interval '1 day' END,
           CASE WHEN s = 'running' THEN 'w-1' END,
           CASE WHEN s = 'running' THEN now() + interval '1 minute' END
      FROM generate_series(1, %(n)s) g,
           LATERAL (SELECT (%(statuses)s::text[])[1 + g %% 6] AS s) st
    RETURNING id
), o AS (
    INSERT INTO operation_outputs (execution_id, step_id, output) SELECT id, step, to_jsonb(id)
      FROM e, unnest(ARRAY['a', 'b']) step
), a AS (
    INSERT INTO step_attempts (execution_id, step_id, attempt, outcome) SELECT id, 'a', 1, 'success' FROM e
), w AS (
    INSERT INTO workflow_waits (execution_id, step_id, kind, wake_at) SELECT id, 'nap', 'sleep', now() FROM e
)
SELECT count(*) FROM e
"""
N = 3000
# The function files a version-19 schema does not have: those a migration after 19 created
# (schema_history.py), and batch_ranges (first used by 0022).
LATER = {"batch_ranges"} | created_after(19)


def functions_at_19() -> list[FunctionFile]:
    """The function files of a version-19 schema: those it had, and not those 0038 changed to
    name the bucket (a column it does not have): its migrations made them as they were then."""
    return [f for f in function_files() if f.name not in LATER | BUCKET_FUNCTIONS]


COLUMNS = (
    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
)


def columns(conn: psycopg.Connection, table: str) -> list[str]:
    return [r[0] for r in conn.execute(COLUMNS, (f"{SCHEMA}.{table}",))]


def rows(conn: psycopg.Connection, table: str, only: list[str]) -> list[str]:
    """Each row of ``table`` as text, of the columns ``only`` (those it had before: a later
    migration may add nullable columns, which rewrite nothing)."""
    listed = ", ".join(f"t.{c}" for c in only)
    return [r[0] for r in conn.execute(f"SELECT ({listed})::text FROM {table} t ORDER BY {TABLES[table]}")]


def filenode(conn: psycopg.Connection, relation: str) -> int:
    return conn.execute("SELECT pg_relation_filenode(%s::regclass)", (f"{SCHEMA}.{relation}",)).fetchone()[0]


@pytest.fixture(scope="module")
def migrated_from_19(database: str):
    """A schema migrated to version 19, populated, then migrated to the latest: what it held
    before, and a connection to it."""
    with psycopg.connect(database, autocommit=True, options=f"-c search_path={SCHEMA}") as conn:
        migrate(conn, SCHEMA, migrations=[m for m in available() if m.version <= 19], functions=functions_at_19())
        statuses = ["enqueued", "running", "waiting", "success", "error", "cancelled"]
        assert conn.execute(SEED, {"n": N, "statuses": statuses}).fetchone()[0] == N
        kept = {table: columns(conn, table) for table in TABLES}
        before = {table: rows(conn, table, kept[table]) for table in TABLES}
        nodes = {
            name: filenode(conn, name)
            for name in ("workflow_executions", "workflow_executions_name_idx", "operation_outputs", "step_attempts")
        }
        ready = conn.execute("SELECT count(*) FROM executions_ready").fetchone()[0]
        counted = conn.execute("SELECT sum(n) FROM execution_counts").fetchone()[0]
        applied = migrate(conn, SCHEMA)
        yield conn, before, nodes, ready, counted, applied, kept


def test_every_row_is_kept_and_nothing_is_rewritten(migrated_from_19) -> None:
    conn, before, nodes, ready, counted, applied, kept = migrated_from_19
    assert applied[:3] == [20, 21, 22]
    for table in TABLES:
        assert rows(conn, table, kept[table]) == before[table], table
        kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", (f"{SCHEMA}.{table}",)).fetchone()
        assert kind == ("p",)
    # today's tables and their indexes became the first partition's, as they were on disk
    assert filenode(conn, "workflow_executions_p0") == nodes["workflow_executions"]
    assert filenode(conn, "workflow_executions_p0_name_idx") == nodes["workflow_executions_name_idx"]
    assert filenode(conn, "operation_outputs_p0") == nodes["operation_outputs"]
    assert filenode(conn, "step_attempts_p0") == nodes["step_attempts"]
    lo, hi = conn.execute("SELECT lo, hi FROM history_partitions ORDER BY lo LIMIT 1").fetchone()
    assert lo == 0 and hi > N
    assert conn.execute("SELECT count(*) FROM executions_ready").fetchone()[0] == ready
    assert conn.execute("SELECT sum(n) FROM execution_counts").fetchone()[0] == counted


def test_keys_stay_unique_and_ids_go_on(migrated_from_19) -> None:
    conn, *_ = migrated_from_19
    keyed = conn.execute(
        "SELECT count(*) FROM workflow_executions WHERE idempotency_key IS NOT NULL OR engine_key IS NOT NULL"
    ).fetchone()[0]
    assert conn.execute("SELECT count(*) FROM execution_keys").fetchone()[0] == keyed
    taken = "INSERT INTO workflow_executions (workflow_name, idempotency_key) VALUES ('w', 'user-3') RETURNING id"
    assert conn.execute(taken).fetchall() == []
    engine = "INSERT INTO workflow_executions (workflow_name, engine_key) VALUES ('w', 'child:5:s') RETURNING id"
    assert conn.execute(engine).fetchall() == []
    new = conn.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('w') RETURNING id").fetchone()[0]
    assert new == N + 3  # the two skipped rows took their ids, as ON CONFLICT DO NOTHING did
    attempt = conn.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt) VALUES (%s, 'a', 1) RETURNING id", (new,)
    ).fetchone()[0]
    assert attempt == N + 1


def test_triggers_fire_once_per_row_on_the_partitioned_tables(migrated_from_19) -> None:
    conn, *_ = migrated_from_19
    eid = conn.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('once') RETURNING id").fetchone()[0]
    assert conn.execute("SELECT count(*) FROM executions_ready WHERE id = %s", (eid,)).fetchone()[0] == 1
    counted = conn.execute("SELECT sum(n) FROM execution_counts").fetchone()[0]
    conn.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() WHERE id = %s", (eid,))
    assert conn.execute("SELECT sum(n) FROM execution_counts").fetchone()[0] == counted + 1
    assert conn.execute("SELECT count(*) FROM executions_ready WHERE id = %s", (eid,)).fetchone()[0] == 0
    # an old finished execution deleted: its steps and key go (the foreign keys' cascade, now
    # a trigger), and the counters follow once
    old = conn.execute(
        "SELECT id FROM workflow_executions WHERE status = 'success' AND idempotency_key IS NOT NULL LIMIT 1"
    ).fetchone()[0]
    conn.execute("DELETE FROM workflow_executions WHERE id = %s", (old,))
    assert conn.execute("SELECT sum(n) FROM execution_counts").fetchone()[0] == counted
    for table in ("operation_outputs", "step_attempts", "workflow_waits", "execution_keys"):
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE execution_id = %s", (old,)).fetchone()[0] == 0
