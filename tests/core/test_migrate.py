"""Schema migrations: versioned, idempotent, safe to run concurrently; old schemas are refused."""

from __future__ import annotations

import threading

import psycopg
import pytest

from kestrel_core import Kestrel, SchemaOutdated
from kestrel_core.migrate import LATEST, available

# Version numbers may have gaps (each engineer gets a number): compare with what ships.
SHIPPED = [m.version for m in available()]


def test_migrate_is_idempotent_and_versioned(database: str) -> None:
    with Kestrel(database, schema="mig_once") as app:
        first = app.migrate()
        second = app.migrate()
    assert first == SHIPPED
    assert second == []
    with psycopg.connect(database) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM mig_once.schema_migrations ORDER BY 1")]
    assert versions == first


def test_concurrent_migrations_apply_each_version_once(database: str) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(Kestrel(database, schema="mig_race").migrate())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    applied = [r for r in results if r]
    assert len(applied) == 1 and applied[0] == SHIPPED
    assert sum(1 for r in results if r == []) == 7


def test_missing_schema_tells_to_migrate(database: str) -> None:
    with Kestrel(database, schema="never_migrated") as app:
        with pytest.raises(SchemaOutdated, match="run `kestrel-console migrate`"):
            app.enqueue("x")


def test_older_schema_tells_to_migrate(database: str) -> None:
    with Kestrel(database, schema="mig_old") as app:
        app.migrate()
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DELETE FROM mig_old.schema_migrations WHERE version = %s", (LATEST,))
    with Kestrel(database, schema="mig_old") as app:
        with pytest.raises(SchemaOutdated, match=f"at version {SHIPPED[-2]}, this code needs {LATEST}"):
            app.get(1)


def test_schema_name_is_validated() -> None:
    with pytest.raises(ValueError, match="invalid schema name"):
        Kestrel("", schema="bad; DROP TABLE x")


def test_migrate_creates_the_least_privilege_roles(database: str) -> None:
    from kestrel_core.roles import RoleNames

    names = RoleNames(worker="kt_mig_worker", operator="kt_mig_operator")
    with Kestrel(database, schema="mig_roles") as app:
        app.migrate(roles=names)
    with psycopg.connect(database, autocommit=True) as conn:
        found = {r[0]: r[1] for r in conn.execute(
            "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname IN ('kt_mig_worker', 'kt_mig_operator')")}
        can_update = conn.execute(
            "SELECT has_table_privilege('kt_mig_operator', 'mig_roles.workflow_executions', 'UPDATE'),"
            "       has_table_privilege('kt_mig_worker', 'mig_roles.workflow_executions', 'UPDATE')").fetchone()
    assert found == {"kt_mig_worker": False, "kt_mig_operator": False}
    assert can_update == (False, True)
