"""Schema migrations: versioned, idempotent, safe to run concurrently; old and newer schemas are
refused; functions kept as files; steps outside the transaction (concurrent index builds)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from kestrel_core import Kestrel, SchemaOutdated, SchemaTooNew
from kestrel_core.db.migrate import LATEST, FunctionFile, Migration, available, function_files, migrate, schema_version
from tests.waiting import wait_until_blocked

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


def at_once(n: int, migrating: Callable[[], list[int]]) -> list[list[int]]:
    """What ``migrating`` returned in each of ``n`` threads run at once; none may raise."""
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrating())
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return results


def migrate_on(database: str, schema: str, migrations: list[Migration]) -> list[int]:
    with psycopg.connect(database, autocommit=True) as conn:
        return migrate(conn, schema, migrations=migrations)


def test_concurrent_migrations_apply_each_version_once(database: str) -> None:
    results = at_once(8, lambda: Kestrel(database, schema="mig_race").migrate())
    # Each version is applied by exactly one caller. An outside-transaction migration (0016)
    # is applied by whichever caller holds its own lock, so the versions may be split between
    # two callers: the one that applied the transactional ones and the one that built the index.
    applied = sorted(version for r in results for version in r)
    assert applied == SHIPPED
    assert len(results) == 8


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
    from kestrel_core.db.roles import RoleNames

    names = RoleNames(worker="kt_mig_worker", operator="kt_mig_operator")
    with Kestrel(database, schema="mig_roles") as app:
        app.migrate(roles=names)
    with psycopg.connect(database, autocommit=True) as conn:
        found = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname IN ('kt_mig_worker', 'kt_mig_operator')"
            )
        }
        can_update = conn.execute(
            "SELECT has_table_privilege('kt_mig_operator', 'mig_roles.workflow_executions', 'UPDATE'),"
            "       has_column_privilege('kt_mig_worker', 'mig_roles.workflow_executions', 'status', 'UPDATE'),"
            "       has_column_privilege('kt_mig_worker', 'mig_roles.workflow_executions', 'input', 'UPDATE')"
        ).fetchone()
    assert found == {"kt_mig_worker": False, "kt_mig_operator": False}
    assert can_update == (False, True, False)  # the worker: the columns a run writes (migration 0029)


# -- a database newer than the code -------------------------------------------------------------


def _record_future_version(database: str, schema: str) -> int:
    future = LATEST + 1
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_migrations (version, name) VALUES (%s, 'from_the_future')").format(
                sql.Identifier(schema)
            ),
            (future,),
        )
    return future


def test_a_database_newer_than_the_code_is_refused_by_the_api_and_by_migrate(database: str) -> None:
    with Kestrel(database, schema="mig_new") as app:
        app.migrate()
    future = _record_future_version(database, "mig_new")
    line = f"the Kestrel schema 'mig_new' is at version {future}, this code knows up to {LATEST}: upgrade kestrel"
    with Kestrel(database, schema="mig_new") as app:
        with pytest.raises(SchemaTooNew) as refused:
            app.get(1)
        assert str(refused.value) == line
        with pytest.raises(SchemaTooNew) as refused_migrate:
            app.migrate()
        assert str(refused_migrate.value) == line
    assert issubclass(SchemaTooNew, SchemaOutdated)  # every handler of an unusable schema has it


def test_a_worker_refuses_a_database_newer_than_the_code(database: str) -> None:
    with Kestrel(database, schema="mig_new_worker") as app:
        app.migrate()
    future = _record_future_version(database, "mig_new_worker")
    app = Kestrel(database, schema="mig_new_worker")
    app.workflow("noop")(lambda ctx, _: None)
    worker = app.worker(concurrency=1)
    with pytest.raises(SchemaTooNew, match=f"at version {future}, this code knows up to {LATEST}: upgrade kestrel"):
        worker.start()
    worker.stop(grace=timedelta(0))


# -- functions kept as code: schema/functions/<name>.sql ----------------------------------------

FUNCTION_FILES = {f.name: f for f in function_files()}
CREATES_FUNCTION = re.compile(r"CREATE\s+(OR\s+REPLACE\s+)?FUNCTION\s+\{schema\}\.(\w+)\s*\(", re.IGNORECASE)
# The migrations written before the functions became files: their CREATE OR REPLACE are history.
LAST_MIGRATION_WITH_FUNCTIONS = 10


def test_each_function_file_defines_its_own_function_once() -> None:
    assert len(FUNCTION_FILES) >= 18
    for name, function in FUNCTION_FILES.items():
        defined = CREATES_FUNCTION.findall(function.text)
        assert defined == [("OR REPLACE ", name)], (name, defined)


def _redefinitions(migrations: list[Migration]) -> list[tuple[int, str]]:
    """(version, function) for each CREATE OR REPLACE FUNCTION in a migration after 0010."""
    return [
        (m.version, name)
        for m in migrations
        if m.version > LAST_MIGRATION_WITH_FUNCTIONS
        for replace, name in CREATES_FUNCTION.findall(m.text)
        if replace
    ]


def test_no_migration_after_0010_redefines_a_function_that_has_a_file() -> None:
    # A function changes in its file (applied after every migration): a CREATE OR REPLACE in a
    # later migration is overwritten by the file at once on a fresh database, and is the version
    # that counts only where the file did not change. Port its body into
    # schema/functions/<name>.sql instead. (A plain CREATE FUNCTION, a new function's first
    # version for a trigger the migration attaches, cannot overwrite anything: allowed.)
    assert _redefinitions(available()) == []


def test_the_check_catches_a_migration_that_redefines_a_function() -> None:
    later = [
        *available(),
        Migration(
            11,
            "redefines",
            "ALTER TABLE {schema}.workers ADD COLUMN x int;\n"
            "create or replace function {schema}.decide_approval(p bigint)",
        ),
        Migration(12, "new_trigger", "CREATE FUNCTION {schema}.on_x() RETURNS trigger"),
    ]
    assert _redefinitions(later) == [(11, "decide_approval")]


def test_every_function_of_the_schema_has_its_file(migrated: str) -> None:
    with psycopg.connect(migrated, autocommit=True) as conn:
        live = {r[0] for r in conn.execute("SELECT proname FROM pg_proc WHERE pronamespace = 'kestrel'::regnamespace")}
    assert live == set(FUNCTION_FILES)


FUNCTION_BODY = """SELECT p.prosrc FROM pg_proc p
 WHERE p.pronamespace = %s::regnamespace AND p.proname = 'notify_channel'"""


def _notify_channel_file(returns: str) -> FunctionFile:
    text = FUNCTION_FILES["notify_channel"].text.replace(
        "SELECT 'kestrel:' || current_schema()", f"SELECT 'kestrel:' || current_schema() || '{returns}'"
    )
    assert text != FUNCTION_FILES["notify_channel"].text
    return FunctionFile("notify_channel", text)


def test_a_changed_function_file_is_applied_once_and_an_older_one_refused(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    others = [f for f in FUNCTION_FILES.values() if f.name != "notify_channel"]
    with psycopg.connect(database, autocommit=True) as conn:
        migrate(conn, "mig_fn")
        body = conn.execute(FUNCTION_BODY, ("mig_fn",)).fetchone()[0]
        assert "'-v2'" not in body
        newer = [*others, _notify_channel_file("-v2")]
        caplog.set_level("INFO", logger="kestrel.migrate")
        caplog.clear()
        assert migrate(conn, "mig_fn", functions=newer) == []  # no version: the function only
        assert "'-v2'" in conn.execute(FUNCTION_BODY, ("mig_fn",)).fetchone()[0]
        assert caplog.messages == ["event=function_applied schema=mig_fn function=notify_channel"]
        migrate(conn, "mig_fn", functions=newer)
        rows = conn.execute(
            "SELECT name, count(*) FROM mig_fn.schema_functions GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
        assert rows == [("notify_channel", 2)]  # applied once at first, once when it changed
        with pytest.raises(SchemaTooNew, match=r"newer definition of the function notify_channel\(\)"):
            migrate(conn, "mig_fn")  # this code's file is the older text: never written back
        assert "'-v2'" in conn.execute(FUNCTION_BODY, ("mig_fn",)).fetchone()[0]


def test_a_failing_function_file_rolls_back_the_migrations_of_the_same_run(database: str) -> None:
    broken = FunctionFile(
        "zz_broken",
        "CREATE OR REPLACE FUNCTION {schema}.zz_broken() RETURNS int "
        "LANGUAGE sql AS $$ SELECT no_such_column FROM workflow_executions $$;",
    )
    # The shipped migrations up to the first one run outside a transaction (it commits those
    # before it): the transaction the function files share.
    shipped = available()
    first_outside = next((i for i, m in enumerate(shipped) if m.outside_transaction), len(shipped))
    with psycopg.connect(database, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            migrate(
                conn, "mig_fn_fail", migrations=shipped[:first_outside], functions=[*FUNCTION_FILES.values(), broken]
            )
        assert schema_version(conn, "mig_fn_fail") is None  # one transaction: nothing stayed


# -- steps run outside the transaction (CREATE INDEX CONCURRENTLY) ------------------------------

# On the hot table's first partition, where a fresh schema's rows go: a partitioned table
# takes no concurrent build (migration 0022); its partitions, plain tables, do.
CONCURRENT_TEXT = """-- kestrel: outside transaction
-- A test index built without blocking writes to the hot table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_test_cic_idx
    ON {schema}.workflow_executions_p0 (updated_at) WHERE status = 'running';
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_test_unique_idx
    ON {schema}.workflow_executions_p0 (workflow_name);
"""
AFTER_TEXT = "CREATE TABLE {schema}.test_after_concurrent (id int)"
INDEXES = """SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace = %s::regnamespace AND c.relname LIKE 'workflow_executions_test_%%' ORDER BY 1"""


def _with_concurrent_step() -> list[Migration]:
    return [
        *available(),
        Migration(LATEST + 1, "test_concurrent", CONCURRENT_TEXT),
        Migration(LATEST + 2, "test_after", AFTER_TEXT),
    ]


def test_an_outside_transaction_step_builds_its_indexes_concurrently_from_many_processes(database: str) -> None:
    migrations = _with_concurrent_step()
    assert [m.outside_transaction for m in migrations[-2:]] == [True, False]
    results = at_once(4, lambda: migrate_on(database, "mig_cic", migrations))
    assert sorted(v for r in results for v in r) == [m.version for m in migrations]  # each once
    with psycopg.connect(database, autocommit=True) as conn:
        assert conn.execute(INDEXES, ("mig_cic",)).fetchall() == [
            ("workflow_executions_test_cic_idx", True),
            ("workflow_executions_test_unique_idx", True),
        ]
        assert conn.execute("SELECT to_regclass('mig_cic.test_after_concurrent') IS NOT NULL").fetchone() == (True,)


def test_an_interrupted_concurrent_build_is_redone_by_the_next_migrate(database: str) -> None:
    migrations = _with_concurrent_step()
    with psycopg.connect(database, autocommit=True) as conn:
        migrate(conn, "mig_cic_retry")  # the shipped schema, then rows the unique index refuses
        conn.execute("INSERT INTO mig_cic_retry.workflow_executions (workflow_name) VALUES ('w'), ('w')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            migrate(conn, "mig_cic_retry", migrations=migrations)
        assert conn.execute(INDEXES, ("mig_cic_retry",)).fetchall() == [
            ("workflow_executions_test_cic_idx", True),
            ("workflow_executions_test_unique_idx", False),
        ]
        assert schema_version(conn, "mig_cic_retry") == LATEST  # not recorded, nothing after it ran
        conn.execute("DELETE FROM mig_cic_retry.workflow_executions")
        assert migrate(conn, "mig_cic_retry", migrations=migrations) == [LATEST + 1, LATEST + 2]
        assert conn.execute(INDEXES, ("mig_cic_retry",)).fetchall() == [
            ("workflow_executions_test_cic_idx", True),
            ("workflow_executions_test_unique_idx", True),
        ]


def test_an_outside_transaction_step_may_not_hide_a_function() -> None:
    text = "-- kestrel: outside transaction\nDO $$ BEGIN PERFORM 1; END $$;\n"
    with pytest.raises(ValueError, match="may not define functions"):
        Migration(99, "bad", text).statements()


def test_migrate_refuses_a_version_it_does_not_know_below_its_latest(database: str) -> None:
    # Version numbers have gaps: a database may hold one this code skipped (another release's).
    with psycopg.connect(database, autocommit=True) as conn:
        migrate(conn, "mig_gap")
        conn.execute("INSERT INTO mig_gap.schema_migrations (version, name) VALUES (%s, 'elsewhere')", (LATEST + 1,))
        shipped = [*available(), Migration(LATEST + 2, "later", "SELECT 1")]
        with pytest.raises(SchemaTooNew, match=f"has migration\\(s\\) {LATEST + 1} that this code does not know"):
            migrate(conn, "mig_gap", migrations=shipped)


def test_writes_to_the_hot_table_go_on_while_its_index_is_built(database: str) -> None:
    # A plain CREATE INDEX would queue its SHARE lock behind the open writer below, and every
    # later INSERT behind it: the INSERT would meet its lock_timeout. CONCURRENTLY takes a lock
    # that writers do not conflict with; the build waits for the open writer, writes go on.
    migrations = _with_concurrent_step()
    with psycopg.connect(database, autocommit=True) as conn:
        migrate(conn, "mig_cic_writes")
    errors: list[BaseException] = []

    def build() -> None:
        try:
            with psycopg.connect(database, autocommit=True, application_name="kt-migrate-cic") as conn:
                migrate(conn, "mig_cic_writes", migrations=migrations)
        except BaseException as exc:  # asserted below
            errors.append(exc)

    with psycopg.connect(database) as writer, psycopg.connect(database, autocommit=True) as observer:
        writer.execute("INSERT INTO mig_cic_writes.workflow_executions (workflow_name) VALUES ('open')")
        builder = threading.Thread(target=build)
        builder.start()
        try:
            wait_until_blocked(observer, "kt-migrate-cic")  # the build waits for the open writer
            with psycopg.connect(database, autocommit=True, options="-c lock_timeout=2000") as other:
                other.execute("INSERT INTO mig_cic_writes.workflow_executions (workflow_name) VALUES ('meanwhile')")
        finally:
            writer.commit()
            builder.join(timeout=60)
    assert errors == [] and not builder.is_alive()
    with psycopg.connect(database, autocommit=True) as conn:
        assert conn.execute(INDEXES, ("mig_cic_writes",)).fetchall() == [
            ("workflow_executions_test_cic_idx", True),
            ("workflow_executions_test_unique_idx", True),
        ]


# -- a concurrent build on the partitioned history (migration 0025's way) ----------------------

PARTITIONED_TEXT = """-- kestrel: outside transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_executions_test_part_idx
    ON {schema}.workflow_executions (updated_at) WHERE status = 'running';
"""
# The test index and its partitions' indexes (named by migrate, or by PostgreSQL for ranges
# created after it): (table, valid, parent index).
PARTITION_INDEXES = """
SELECT t.relname, x.indisvalid,
       (SELECT p.relname FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent WHERE h.inhrelid = i.oid)
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
 WHERE i.relnamespace = %s::regnamespace
   AND (i.relname = 'workflow_executions_test_part_idx'
        OR i.oid IN (SELECT h.inhrelid FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent
                      WHERE p.relname = 'workflow_executions_test_part_idx'))
 ORDER BY 1
"""
RANGES = "SELECT 'workflow_executions_p' || lo FROM {schema}.history_partitions ORDER BY lo"


def _partitioned_step() -> list[Migration]:
    return [*available(), Migration(LATEST + 1, "test_partitioned", PARTITIONED_TEXT)]


def _assert_on_every_partition(conn: psycopg.Connection, schema: str) -> None:
    ranges = [r[0] for r in conn.execute(RANGES.replace("{schema}", schema)).fetchall()]
    found = conn.execute(PARTITION_INDEXES, (schema,)).fetchall()
    assert ("workflow_executions", True, None) in found
    children = {t: (valid, parent) for t, valid, parent in found if t != "workflow_executions"}
    assert children == {t: (True, "workflow_executions_test_part_idx") for t in ranges}


def test_a_concurrent_build_on_the_partitioned_history_from_many_processes(database: str) -> None:
    """PostgreSQL refuses CREATE INDEX CONCURRENTLY on a partitioned table: migrate builds each
    partition's index concurrently, then the parent's ON ONLY, and attaches them; once, from
    whichever of four processes; ranges created later get the index from the parent."""
    migrations = _partitioned_step()
    at_once(4, lambda: migrate_on(database, "mig_part", migrations))
    with psycopg.connect(database, autocommit=True) as conn:
        _assert_on_every_partition(conn, "mig_part")
        conn.execute("SELECT mig_part.ensure_partitions(6)")  # more ranges: the index comes with them
        _assert_on_every_partition(conn, "mig_part")


def test_an_interrupted_partitioned_build_is_resumed(database: str) -> None:
    """Left with the parent's index invalid and one partition's built but not attached (a
    migrate stopped half way), the next migrate finishes it: no index is dropped or doubled."""
    with psycopg.connect(database, autocommit=True) as conn:
        migrate(conn, "mig_part_resume")
        conn.execute(
            "CREATE INDEX workflow_executions_test_part_idx ON ONLY mig_part_resume.workflow_executions"
            " (updated_at) WHERE status = 'running'"
        )
        conn.execute(
            "CREATE INDEX workflow_executions_p0_test_part_idx ON mig_part_resume.workflow_executions_p0"
            " (updated_at) WHERE status = 'running'"
        )
        assert migrate(conn, "mig_part_resume", migrations=_partitioned_step()) == [LATEST + 1]
        _assert_on_every_partition(conn, "mig_part_resume")
