"""Migration 0020 copies the idempotency keys into execution_keys while writers go on: a key
inserted by a transaction still open during the first copy (with an id lower than keys the copy
saw) must be copied too, or a later enqueue with that key would run the workflow twice."""

from __future__ import annotations

import threading

import psycopg

from kestrel_core.db.migrate import available, migrate
from tests.core.test_partitions_migration import functions_at_19
from tests.waiting import wait_for

SCHEMA = "part_keys"
INSERT_KEYED = "INSERT INTO workflow_executions (workflow_name, idempotency_key) VALUES ('w', %s) RETURNING id"
# migrate's backend waiting for the lock of its CREATE TRIGGER, behind the open insert
WAITING_FOR = "SELECT mode FROM pg_locks WHERE pid = %s AND NOT granted"


def test_a_key_committed_during_the_copy_with_a_lower_id_is_copied(database: str) -> None:
    options = f"-c search_path={SCHEMA}"
    with psycopg.connect(database, autocommit=True, options=options) as conn:
        migrate(conn, SCHEMA, migrations=[m for m in available() if m.version <= 19], functions=functions_at_19())
    late = psycopg.connect(database, options=options)  # a transaction left open: a slow producer
    early_id = late.execute(INSERT_KEYED, ("late-key",)).fetchone()[0]
    with psycopg.connect(database, autocommit=True, options=options) as conn:
        assert conn.execute(INSERT_KEYED, ("early-key",)).fetchone()[0] > early_id  # committed first
    errors: list[BaseException] = []
    pids: list[int] = []

    def run() -> None:
        try:
            with psycopg.connect(database, autocommit=True, options=options) as conn:
                pids.append(conn.info.backend_pid)
                migrate(conn, SCHEMA)
        except BaseException as exc:  # reported below
            errors.append(exc)

    migrating = threading.Thread(target=run)
    migrating.start()
    try:
        with psycopg.connect(database, autocommit=True) as watch:
            wait_for(lambda: pids and watch.execute(WAITING_FOR, (pids[0],)).fetchone(), what="migrate to wait")
            assert watch.execute(WAITING_FOR, (pids[0],)).fetchone() == ("ShareRowExclusiveLock",)
        late.commit()
    finally:
        late.close()
        migrating.join()
    assert errors == []
    with psycopg.connect(database, autocommit=True, options=options) as conn:
        keys = dict(conn.execute("SELECT key, execution_id FROM execution_keys").fetchall())
        assert keys.get("late-key") == early_id
        assert conn.execute(INSERT_KEYED, ("late-key",)).fetchall() == []  # deduplicated: no second run
