"""The ad-hoc SQL guard's three layers against the whole classes of issue 9, on a real Postgres.

Layer 1 (the allowlist) must refuse every function a query names, including through attribute
notation (``(x).f`` and ``t.f`` are the call ``f(x)``) in every position, and every function
that runs SQL given as text; each refusal names the function, and nothing changed: no row, no
lock of the session (seen from another connection in pg_locks), no setting, no victim session
killed. Layer 3 (the reader role and the cleanup after each query) must hold on its own, with
layer 1 bypassed. Plus the byte limit and the refused sub-millisecond timeout.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kestrel_console.adhoc import QueryFailed, QueryRefused, timeout_ms
from kestrel_console.adhoc import run_read_only as _run_read_only
from tests.conftest import KeptSessions

SEED = """
INSERT INTO kestrel.workflow_executions (workflow_name, status, input) VALUES
    ('report', 'success', '{"pod": "api-1"}'), ('import', 'error', '{"pod": "db-1"}');
INSERT INTO kestrel.workers (worker_id, hostname, pid, workflows, concurrency)
VALUES ('w1', 'host-a', 4242, '{report}', 4);
"""
ROWS = """
SELECT (SELECT md5(string_agg(e::text, '|' ORDER BY id)) FROM kestrel.workflow_executions e),
       (SELECT md5(string_agg(w::text, '|' ORDER BY worker_id)) FROM kestrel.workers w),
       (SELECT last_value FROM pg_sequences WHERE schemaname = 'kestrel'
         AND sequencename = 'workflow_executions_id_seq'),
       (SELECT count(*) FROM pg_largeobject_metadata)
"""
# What one session holds, seen from another connection.
LOCKS_OF = "SELECT locktype, mode FROM pg_locks WHERE pid = %s AND locktype = 'advisory'"
SETTINGS = (
    "SELECT current_setting('work_mem'), current_setting('search_path'), current_user, "
    "current_setting('statement_timeout'), "
    "(SELECT count(*) FROM pg_prepared_statements WHERE name NOT LIKE '\\_pg3\\_%%')"
)

# These tests run as the test server's superuser on purpose (the layers under the strongest
# login), so they opt in as the console's --allow-privileged-sql does.
run_read_only = functools.partial(_run_read_only, allow_privileged=True)


@pytest.fixture
def seeded(dsn: str, sessions: KeptSessions) -> str:
    sessions.session(dsn, "observer").execute(SEED)
    return dsn


@pytest.fixture
def session(seeded: str, sessions: KeptSessions) -> psycopg.Connection:
    """The console's ad-hoc connection."""
    return sessions.session(seeded, "adhoc")


def snapshot(session: psycopg.Connection, observer: psycopg.Connection) -> tuple:
    return (
        observer.execute(ROWS).fetchone(),
        observer.execute(LOCKS_OF, (session.info.backend_pid,)).fetchall(),
        session.execute(SETTINGS).fetchone(),
    )


@dataclass
class Guarded:
    """The ad-hoc session, an observer of what it holds, and a victim it must not kill."""

    session: psycopg.Connection
    observer: psycopg.Connection
    victim: psycopg.Connection

    @property
    def pid(self) -> int:
        return self.victim.info.backend_pid

    @contextlib.contextmanager
    def nothing_changes(self) -> Iterator[None]:
        """No row, lock of the session or setting changed, and the victim is alive."""
        before = snapshot(self.session, self.observer)
        yield
        assert snapshot(self.session, self.observer) == before
        assert self.victim.execute("SELECT 1").fetchone() == (1,)  # not terminated

    def refusal(self, query: str) -> str:
        """The guard's reason for refusing ``query``."""
        with pytest.raises(QueryRefused) as refused:
            run_read_only(self.session, query)
        return refused.value.reason

    def failure(self, query: str, *, check: bool = True) -> QueryFailed:
        """How Postgres failed ``query`` (its ``sqlstate``)."""
        with pytest.raises(QueryFailed) as failed:
            run_read_only(self.session, query, check=check)
        return failed.value


@pytest.fixture
def guarded(seeded: str, sessions: KeptSessions, session: psycopg.Connection, observer: psycopg.Connection) -> Guarded:
    """The victim is another session: what pg_terminate_backend / pg_cancel_backend would hit."""
    return Guarded(session, observer, sessions.session(seeded, "victim"))


# (query, the function the reason must name). {pid} is the victim's backend pid.
HOSTILE = {
    # attribute notation, in every position
    "attr-select": ("SELECT ({pid}).pg_terminate_backend", "pg_terminate_backend"),
    "attr-where": ("SELECT 1 FROM workers WHERE ({pid}).pg_cancel_backend", "pg_cancel_backend"),
    "attr-order-by": (
        "SELECT id FROM workflow_executions ORDER BY ({pid}).pg_terminate_backend",
        "pg_terminate_backend",
    ),
    "attr-group-by": ("SELECT count(*) FROM workers GROUP BY ({pid}).pg_terminate_backend", "pg_terminate_backend"),
    "attr-having": ("SELECT 1 FROM workers GROUP BY 1 HAVING ({pid}).pg_cancel_backend", "pg_cancel_backend"),
    "attr-lateral": ("SELECT * FROM workers, LATERAL (SELECT ({pid}).pg_terminate_backend) s", "pg_terminate_backend"),
    "attr-cte": ("WITH x AS (SELECT ('/etc/hostname'::text).pg_read_file) SELECT * FROM x", "pg_read_file"),
    "attr-subquery": ("SELECT * FROM (SELECT (42::bigint).pg_advisory_lock) s", "pg_advisory_lock"),
    "attr-in-exists": ("SELECT 1 WHERE EXISTS (SELECT (7::bigint).pg_advisory_lock_shared)", "pg_advisory_lock_shared"),
    "attr-join-on": ("SELECT 1 FROM workers a JOIN workers b ON ({pid}).pg_terminate_backend", "pg_terminate_backend"),
    "attr-table-dot": ("SELECT w.pg_advisory_lock FROM workers w", "pg_advisory_lock"),
    "attr-nested": ("SELECT ((({pid}))).pg_terminate_backend", "pg_terminate_backend"),
    "attr-quoted": ('SELECT ({pid})."pg_terminate_backend"', "pg_terminate_backend"),
    "attr-nextval": ("SELECT ('workflow_executions_id_seq'::regclass).nextval", "nextval"),
    "attr-lo-import": ("SELECT ('/etc/hostname'::text).lo_import", "lo_import"),
    "attr-setseed": ("SELECT (0.5::float8).setseed", "setseed"),
    # Red team (issue 9): the positions the first list did not have.
    "attr-values": ("SELECT * FROM (VALUES (({pid}).pg_terminate_backend)) v", "pg_terminate_backend"),
    "attr-window": ("SELECT count(*) OVER (ORDER BY ({pid}).pg_cancel_backend) FROM workers", "pg_cancel_backend"),
    "attr-subscript": (
        "SELECT a[((42::bigint).pg_try_advisory_lock)::int] FROM (SELECT ARRAY[1] AS a) s",
        "pg_try_advisory_lock",
    ),
    "attr-argument": ("SELECT coalesce(({pid}).pg_terminate_backend, false)", "pg_terminate_backend"),
    "attr-case": ("SELECT CASE WHEN ({pid}).pg_cancel_backend THEN 1 END", "pg_cancel_backend"),
    "attr-whole-row": ("SELECT (w.*).pg_terminate_backend FROM workers w", "pg_terminate_backend"),
    "attr-explain-analyze": ("EXPLAIN ANALYZE SELECT (42::bigint).pg_advisory_lock", "pg_advisory_lock"),
    # functions that run SQL given as text
    "ts-rewrite": (
        "SELECT ts_rewrite('a'::tsquery, 'SELECT pg_terminate_backend({pid})::text::tsquery, ''b''::tsquery')",
        "ts_rewrite",
    ),
    "ts-stat": ("SELECT * FROM ts_stat('SELECT to_tsvector(pg_cancel_backend({pid})::text)')", "ts_stat"),
    "query-to-xml": ("SELECT query_to_xml('SELECT pg_cancel_backend({pid})', true, true, '')", "query_to_xml"),
    "query-to-xmlschema": ("SELECT query_to_xmlschema('SELECT 1', true, true, '')", "query_to_xmlschema"),
    "cursor-to-xml": ("SELECT cursor_to_xml('c'::refcursor, 1, true, true, '')", "cursor_to_xml"),
    "table-to-xml": ("SELECT table_to_xml('workers', true, true, '')", "table_to_xml"),
    "schema-to-xml": ("SELECT schema_to_xml('kestrel', true, true, '')", "schema_to_xml"),
    "database-to-xml": ("SELECT database_to_xml(true, true, '')", "database_to_xml"),
    # server files
    "read-file": ("SELECT pg_read_file('/etc/hostname')", "pg_read_file"),
    "read-binary-file": ("SELECT pg_read_binary_file('/etc/hostname')", "pg_read_binary_file"),
    "ls-dir": ("SELECT * FROM pg_ls_dir('.')", "pg_ls_dir"),
    "ls-logdir": ("SELECT * FROM pg_ls_logdir()", "pg_ls_logdir"),
    "stat-file": ("SELECT (pg_stat_file('/etc/hostname')).size", "pg_stat_file"),
    # advisory locks, session and transaction level
    "advisory-session": ("SELECT pg_advisory_lock(hashtext('kestrel.migrate'))", "pg_advisory_lock"),
    "advisory-xact": ("SELECT pg_advisory_xact_lock(42)", "pg_advisory_xact_lock"),
    "advisory-try": ("SELECT pg_try_advisory_lock(42)", "pg_try_advisory_lock"),
    "advisory-in-where": ("SELECT id FROM workflow_executions WHERE pg_try_advisory_lock(id)", "pg_try_advisory_lock"),
    # settings, sessions, sequences, elsewhere, not ours to call
    "set-config": ("SELECT set_config('work_mem', '1MB', false)", "set_config"),
    "terminate": ("SELECT pg_terminate_backend({pid})", "pg_terminate_backend"),
    "cancel-in-from": ("SELECT * FROM pg_catalog.pg_cancel_backend({pid})", "pg_cancel_backend"),
    "nextval": ("SELECT nextval('workflow_executions_id_seq')", "nextval"),
    "dblink": ("SELECT * FROM dblink('dbname=postgres', 'SELECT 1') AS t(a int)", "dblink"),
    "dblink-exec": ("SELECT dblink_exec('dbname=postgres', 'CREATE TABLE x (a int)')", "dblink_exec"),
    "unknown-function": ("SELECT kestrel_no_such_function(1)", "kestrel_no_such_function"),
    "other-schema": ("SELECT public.lower('X')", "public.lower"),
    "kestrel-function": ("SELECT kestrel.cancel_execution(1, 'mallory', 'x')", "cancel_execution"),
    "alias-spelling": ("SELECT ifnull(NULL, 1)", "ifnull"),
}


@pytest.mark.parametrize("case", HOSTILE.values(), ids=HOSTILE.keys())
def test_layer_one_refuses_naming_the_function_and_nothing_changes(
    case: tuple[str, str],
    guarded: Guarded,
) -> None:
    query, function = case
    with guarded.nothing_changes():
        reason = guarded.refusal(query.replace("{pid}", str(guarded.pid)))
    assert reason.startswith(f"function {function}:"), reason


@pytest.mark.parametrize(
    "query",
    [
        "SELECT w.worker_id, w.hostname FROM workers w ORDER BY w.worker_id",
        "SELECT (w).worker_id, (s).x, s.x FROM workers w, LATERAL (SELECT 1 AS x) s",
        "SELECT e.input->>'pod', upper(e.workflow_name), e.created_at::date FROM workflow_executions e",
        "SELECT * FROM pg_catalog.pg_locks l WHERE l.pid = pg_backend_pid()",
        "SELECT a.pid, a.state FROM pg_stat_activity a WHERE a.datname = current_database()",
        "SELECT count(*) FILTER (WHERE status = 'error') OVER (PARTITION BY workflow_name) FROM workflow_executions",
        "WITH n(i) AS (SELECT 1) SELECT g.i, n.i FROM generate_series(1, 2) g(i), n",
        "SELECT coalesce(NULL, 1), greatest(1, 2), extract(epoch FROM now()) > 0, '1.50'::numeric(10, 2)",
        "SELECT * FROM workers TABLESAMPLE BERNOULLI (100)",
        "SELECT pg_size_pretty(pg_total_relation_size('workflow_executions'))",
    ],
)
def test_ordinary_reads_with_dots_and_keywords_still_run(query: str, session: psycopg.Connection) -> None:
    assert run_read_only(session, query).columns


# --- layer 3 on its own (layer 1 bypassed with check=False) ------------------------------------


def test_layer_three_alone_refuses_signals_files_functions_and_writes(
    guarded: Guarded,
) -> None:
    pid, session = guarded.pid, guarded.session
    with guarded.nothing_changes():
        for query in (
            f"SELECT pg_terminate_backend({pid})",
            f"SELECT ({pid}).pg_cancel_backend",
            "SELECT pg_read_file('/etc/hostname')",
            "SELECT * FROM pg_ls_dir('.')",
            "SELECT kestrel.cancel_execution(1, 'mallory', 'x')",
            "SELECT nextval('workflow_executions_id_seq')",
        ):
            failed = guarded.failure(query, check=False)
            assert failed.sqlstate == "42501", (query, str(failed))  # insufficient privilege
        # Layer 2 (read only) is not what stops it here: the same write, read-write, as the role.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with session.transaction():
                session.execute("SET LOCAL ROLE kestrel_reader")
                session.execute("DELETE FROM kestrel.workflow_executions")


def test_layer_three_alone_releases_locks_and_settings_after_every_query(
    session: psycopg.Connection,
    observer: psycopg.Connection,
) -> None:
    before = snapshot(session, observer)
    # Past layer 1 these run: the session lock must not outlive the query (issue 9: it made
    # `migrate` hang), nor the setting, nor a prepared statement.
    taken = run_read_only(
        session,
        "SELECT pg_advisory_lock(hashtext('kestrel.migrate')), pg_advisory_lock_shared(7), pg_try_advisory_lock(8)",
        check=False,
    )
    assert taken.rows == [("", "", True)]  # void, as text
    run_read_only(session, "SELECT set_config('work_mem', '1MB', false)", check=False)
    with pytest.raises(QueryFailed, match="returned no rows"):  # it ran, and returned nothing
        run_read_only(session, "PREPARE kestrel_evil AS SELECT 1", check=False)
    assert snapshot(session, observer) == before
    assert observer.execute(LOCKS_OF, (session.info.backend_pid,)).fetchall() == []
    # The migrations' lock is free for everyone else.
    assert observer.execute("SELECT pg_try_advisory_lock(hashtext('kestrel.migrate'))").fetchone() == (True,)
    observer.execute("SELECT pg_advisory_unlock_all()")


def test_queries_run_as_the_reader_and_a_superuser_login_is_told(session: psycopg.Connection) -> None:
    result = run_read_only(session, "SELECT current_user::text, session_user::text")
    login = session.info.user
    assert result.rows == [("kestrel_reader", login)]
    assert result.reader is not None and result.reader.assumed and result.reader.superuser
    assert result.notice is not None and result.notice.startswith(f"note: login {login} is a superuser")
    assert session.execute("SELECT current_user::text").fetchone() == (login,)  # SET LOCAL only


@pytest.fixture
def plain_login(seeded: str) -> Iterator[tuple[str, str]]:
    """A LOGIN user with no rights of its own (roles are cluster-wide: random name, dropped)."""
    name = f"kt_plain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(seeded, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA kestrel TO {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("GRANT SELECT ON kestrel.workers TO {}").format(sql.Identifier(name)))
    yield name, make_conninfo(seeded, user=name)
    with psycopg.connect(seeded, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
        admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_a_plain_login_is_refused_until_granted_the_reader_role(seeded: str, plain_login: tuple[str, str]) -> None:
    # Issue 44: ad-hoc SQL runs only as the reader role. Before, such a login ran the query
    # with its own rights and a note (a worker login: its writes stopped only by READ ONLY).
    name, login_dsn = plain_login
    with psycopg.connect(login_dsn, autocommit=True) as conn:
        with pytest.raises(QueryRefused) as refused:
            run_read_only(conn, "SELECT current_user::text, count(*) FROM workers")
        assert refused.value.reason == (
            f"login {name} may not assume role kestrel_reader (ask an admin for: GRANT kestrel_reader TO {name}): "
            "ad-hoc SQL runs only as the read-only role kestrel_reader"
        )
        with psycopg.connect(seeded, autocommit=True) as admin:
            admin.execute(sql.SQL("GRANT kestrel_reader TO {}").format(sql.Identifier(name)))
        granted = run_read_only(conn, "SELECT current_user::text, count(*) FROM workflow_executions")
        assert granted.rows == [("kestrel_reader", 2)] and granted.notice is None
        with pytest.raises(QueryFailed) as failed:  # layer 1 bypassed: the role still says no
            run_read_only(conn, "SELECT kestrel.requeue_execution(2, 'mallory', 'x')", check=False)
        assert failed.value.sqlstate == "42501"


def test_a_missing_reader_role_is_refused(session: psycopg.Connection) -> None:
    with pytest.raises(QueryRefused) as refused:
        run_read_only(session, "SELECT current_user::text", reader_role="kt_no_such_reader")
    assert refused.value.reason == (
        "role kt_no_such_reader does not exist (`kestrel-console migrate` creates it): "
        "ad-hoc SQL runs only as the read-only role kt_no_such_reader"
    )


# --- bytes and timeouts -------------------------------------------------------------------------


def test_results_are_cut_at_max_bytes(session: psycopg.Connection) -> None:
    query = "SELECT g, repeat('x', 1000) FROM generate_series(1, 100) g"
    cut = run_read_only(session, query, max_bytes=10_000)
    assert cut.truncated and cut.cut_at_bytes == 10_000
    assert [row[0] for row in cut.rows] == list(range(1, 10))  # 9 rows of ~1001 bytes fit
    whole = run_read_only(session, query, max_bytes=1_000_000)
    assert (whole.row_count, whole.truncated, whole.cut_at_bytes) == (100, False, None)


@pytest.mark.parametrize("ms", [0, 0.4, 0.999, -5, float("nan"), float("inf")])
def test_a_timeout_below_one_millisecond_is_refused(ms: float, session: psycopg.Connection) -> None:
    with pytest.raises(ValueError, match="ms: it must be"):
        run_read_only(session, "SELECT 1", timeout_ms=ms)
    with pytest.raises(ValueError, match="ms: it must be"):
        timeout_ms(ms / 1000)
    assert timeout_ms(0.0015) == 2 and timeout_ms(0.001) == 1
    assert run_read_only(session, "SHOW statement_timeout", timeout_ms=1500.2).rows == [("1501ms",)]


ALLOWED_FUNCTIONS = Path(__file__).resolve().parents[3] / "kestrel_console" / "adhoc" / "allowed_functions.txt"


# --- the allowlist itself ----------------------------------------------------------------------


def test_the_shipped_allowlist_is_what_the_generator_builds_from_this_catalog(dsn: str) -> None:
    from kestrel_console.adhoc.allowlist import allowed_names, allowed_operators, catalog_names, catalog_types
    from kestrel_console.adhoc.allowlist_build import REVIEWED_VOLATILE, build

    with psycopg.connect(dsn, autocommit=True) as conn:
        built_from = re.search(r"of PostgreSQL (\d+)\.", ALLOWED_FUNCTIONS.read_text()).group(1)  # type: ignore[union-attr]
        server = str(int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000)
        if server != built_from:  # another major version has other catalog functions
            pytest.skip(f"the allowlists are built from PostgreSQL {built_from}'s catalog; this server is {server}")
        allowed, catalog, operators, types, _ = build(conn)
        volatile = {
            name
            for (name,) in conn.execute(
                "SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace "
                "AND provolatile = 'v' AND proname = ANY(%s)",
                (allowed,),
            )
        }
        runs_sql_text = {
            name
            for (name,) in conn.execute(
                "SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace "
                "AND ('refcursor'::regtype = ANY(proargtypes::oid[]) "
                "     OR array_to_string(proargnames, ' ') ~* '\\m(query|sql)\\M')"
            )
        }
    assert set(allowed) == allowed_names() and set(catalog) == catalog_names()
    assert set(operators) == allowed_operators() and set(types) == catalog_types()
    assert {"#", "#>>", "=", "@>", "||"} <= allowed_operators() and {"int4", "text", "jsonb"} <= catalog_types()
    assert volatile <= set(REVIEWED_VOLATILE)  # only the reviewed volatile readers
    assert runs_sql_text and not runs_sql_text & allowed_names()
    assert {
        "ts_rewrite",
        "ts_stat",
        "query_to_xml",
        "cursor_to_xml",
        "table_to_xml",
        "schema_to_xml",
        "database_to_xml",
        "pg_read_file",
        "pg_ls_dir",
        "pg_stat_file",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        "set_config",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "nextval",
        "setval",
        "pg_notify",
        "lo_import",
    }.isdisjoint(allowed_names())
    assert {
        "lower",
        "count",
        "now",
        "jsonb_build_object",
        "pg_sleep",
        "current_setting",
        "generate_series",
    } <= allowed_names()


# --- an admin's helpers in `public`: code the query does not name as a function ------------------

# Helpers an admin might have made (EXECUTE is granted to PUBLIC by default, so kestrel_reader
# may run them; SECURITY DEFINER runs them with the owner's rights). Each kills the session
# whose pid it is given: reached, the victim dies, whatever layers 2 and 3 say.
ADMIN_HELPERS = """
CREATE OR REPLACE FUNCTION public.kt_kill(integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_terminate_backend($1)';
CREATE OR REPLACE FUNCTION public.kt_kill_eq(integer, integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_terminate_backend($1)';
CREATE OR REPLACE FUNCTION public.lower(integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_terminate_backend($1)';
DROP OPERATOR IF EXISTS public.=== (integer, integer);
CREATE OPERATOR public.=== (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.kt_kill_eq);
DROP DOMAIN IF EXISTS public.kt_dom;
CREATE DOMAIN public.kt_dom AS integer CHECK (public.kt_kill(VALUE));
"""


@pytest.fixture(scope="module")
def admin_helpers(migrated: str) -> None:
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute(ADMIN_HELPERS)


# Unqualified: not refused by the guard (an attribute may be a column, an overload or an operator
# is not a name it can check), but the search path holds only pg_catalog and the Kestrel schema,
# so Postgres never finds the helper. (query, SQLSTATE Postgres fails it with)
NOT_COLUMN, NO_FUNCTION, NO_TYPE = "42809", "42883", "42704"
UNQUALIFIED = {
    "attr-select": ("SELECT ({pid}).kt_kill", NOT_COLUMN),
    "attr-where": ("SELECT 1 FROM workers WHERE ({pid}).kt_kill", NOT_COLUMN),
    "attr-order-by": ("SELECT worker_id FROM workers ORDER BY ({pid}).kt_kill", NOT_COLUMN),
    "attr-group-by": ("SELECT count(*) FROM workers GROUP BY ({pid}).kt_kill", NOT_COLUMN),
    "attr-having": ("SELECT 1 FROM workers GROUP BY 1 HAVING ({pid}).kt_kill", NOT_COLUMN),
    "attr-lateral": ("SELECT * FROM workers, LATERAL (SELECT ({pid}).kt_kill) s", NOT_COLUMN),
    "attr-cte": ("WITH x AS (SELECT ({pid}).kt_kill) SELECT * FROM x", NOT_COLUMN),
    "attr-values": ("SELECT * FROM (VALUES (({pid}).kt_kill)) v", NOT_COLUMN),
    "attr-window": ("SELECT count(*) OVER (ORDER BY ({pid}).kt_kill) FROM workers", NOT_COLUMN),
    "attr-subscript": ("SELECT a[(({pid}).kt_kill)::int] FROM (SELECT ARRAY[1] AS a) s", NOT_COLUMN),
    "attr-argument": ("SELECT coalesce(({pid}).kt_kill, false)", NOT_COLUMN),
    "attr-quoted": ('SELECT ({pid})."kt_kill"', NOT_COLUMN),
    "attr-column": ("SELECT s.p FROM (SELECT {pid} AS p) s WHERE (s.p).kt_kill", NOT_COLUMN),
    "explain-analyze": ("EXPLAIN ANALYZE SELECT ({pid}).kt_kill", NOT_COLUMN),
    "overload": ("SELECT lower({pid})", NO_FUNCTION),
}
# Operators and types not in pg_catalog: the guard refuses them by name (issue 18: every
# operator and type is on an allowlist); sent past it, the search path still does not find them.
UNQUALIFIED_REFUSED = {
    "operator": ("SELECT {pid} OPERATOR(===) 0", NO_FUNCTION, "operator ===: not a built-in operator"),
    "operator-infix": ("SELECT {pid} === 0", NO_FUNCTION, "operator ===: not a built-in operator"),
    "domain-cast": ("SELECT {pid}::kt_dom", NO_TYPE, "type kt_dom: not a built-in type"),
    "domain-column-list": (
        "SELECT * FROM json_to_record('{{\"a\": {pid}}}') AS t(a kt_dom)",
        NO_TYPE,
        "type kt_dom: not a built-in type",
    ),
}


@pytest.mark.parametrize("case", UNQUALIFIED_REFUSED.values(), ids=UNQUALIFIED_REFUSED.keys())
def test_an_admins_operator_or_domain_unqualified_is_refused_and_not_found_past_the_guard(
    case: tuple[str, str, str],
    admin_helpers: None,
    guarded: Guarded,
) -> None:
    query, sqlstate, reason = case
    query = query.format(pid=guarded.pid)
    with guarded.nothing_changes():
        refused = guarded.refusal(query)
        assert refused.startswith(reason), refused
        failed = guarded.failure(query, check=False)
        assert failed.sqlstate == sqlstate, str(failed)


@pytest.mark.parametrize("case", UNQUALIFIED.values(), ids=UNQUALIFIED.keys())
def test_an_admins_helper_in_public_is_not_found_unqualified(
    case: tuple[str, str],
    admin_helpers: None,
    guarded: Guarded,
) -> None:
    query, sqlstate = case
    with guarded.nothing_changes():
        failed = guarded.failure(query.format(pid=guarded.pid))
    assert failed.sqlstate == sqlstate, str(failed)


# Qualified: only the guard can stop these (the search path does not apply; kestrel_reader may
# execute the helper), so it refuses them by the schema. (query, the reason's start)
QUALIFIED = {
    "operator": ("SELECT {pid} OPERATOR(public.===) 0", "operator public.===: "),
    "operator-quoted": ('SELECT {pid} OPERATOR("public".===) 0 FROM workers', "operator public.===: "),
    "domain-cast": ("SELECT {pid}::public.kt_dom", "type public.kt_dom: "),
    "domain-cast-function": ("SELECT CAST({pid} AS public.kt_dom)", "type public.kt_dom: "),
    "domain-array": ("SELECT ARRAY[{pid}]::public.kt_dom[]", "type public.kt_dom: "),
    "domain-column-list": (
        "SELECT * FROM json_to_record('{{\"a\": {pid}}}') AS t(a public.kt_dom)",
        "type public.kt_dom: ",
    ),
    "function": ("SELECT public.kt_kill({pid})", "function public.kt_kill: "),
}


@pytest.mark.parametrize("case", QUALIFIED.values(), ids=QUALIFIED.keys())
def test_an_admins_helper_named_with_its_schema_is_refused(
    case: tuple[str, str],
    admin_helpers: None,
    guarded: Guarded,
) -> None:
    query, reason = case
    with guarded.nothing_changes():
        refused = guarded.refusal(query.format(pid=guarded.pid))
    assert refused.startswith(reason), refused
