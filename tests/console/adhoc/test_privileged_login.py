"""Issue 18: ad-hoc SQL does not run on a login no role switch can contain (superuser,
BYPASSRLS, CREATEROLE, or one that may become such a role) unless the caller opts in; and the
bounds it runs with hold on the server (work_mem, temp_file_limit, a ten-minute timeout).

On today's code before the fix every refusal here was a result: the superuser's query ran as
kestrel_reader, whose session could switch back with set_config('role', ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kestrel_console.adhoc import QueryFailed, QueryRefused, read_only, run_read_only
from kestrel_console.adhoc.reader_role import SERVER_POWERS
from kestrel_console.reports import bind_params, find_report, run_report


@pytest.fixture
def login(dsn: str) -> Iterator[Callable[..., str]]:
    """make(attributes, member_of=None) -> DSN of a new login with those role attributes."""
    made: list[str] = []

    def make(attributes: str = "", member_of: str | None = None) -> str:
        name = f"kt_priv_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN " + attributes).format(sql.Identifier(name)))
            if member_of:
                admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(member_of), sql.Identifier(name)))
        made.append(name)
        return make_conninfo(dsn, user=name)

    yield make
    with psycopg.connect(dsn, autocommit=True) as admin:
        for name in reversed(made):
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def refused(dsn: str, query: str = "SELECT count(*) FROM workflow_executions") -> str:
    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(QueryRefused) as caught:
        run_read_only(conn, query)
    return caught.value.reason


def test_a_superuser_login_is_refused_with_one_line_that_says_what_to_do(dsn: str) -> None:
    user = psycopg.conninfo.conninfo_to_dict(dsn)["user"]
    reason = refused(dsn)
    assert reason == (
        f"login {user} is a superuser: ad-hoc SQL does not run on such a login (its session "
        "can undo the read-only role); give the console a read-only login with --reader-dsn "
        "(or $KESTREL_READER_DSN), or pass --allow-privileged-sql"
    )


@pytest.mark.parametrize(("attributes", "what"), [("CREATEROLE", "has CREATEROLE"), ("BYPASSRLS", "has BYPASSRLS")])
def test_createrole_and_bypassrls_logins_are_refused(login, attributes: str, what: str) -> None:
    target = login(attributes)
    user = psycopg.conninfo.conninfo_to_dict(target)["user"]
    assert refused(target).startswith(f"login {user} {what}: ad-hoc SQL does not run on such a login")


def test_a_login_that_may_become_a_privileged_role_is_refused(login) -> None:
    group = psycopg.conninfo.conninfo_to_dict(login("CREATEROLE NOINHERIT"))["user"]
    member = login("", member_of=group)
    user = psycopg.conninfo.conninfo_to_dict(member)["user"]
    assert refused(member).startswith(f"login {user} may become role {group}, which has CREATEROLE: ")


def test_the_opt_in_runs_and_says_so(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        result = run_read_only(conn, "SELECT current_user::text", allow_privileged=True)
    assert result.rows == [("kestrel_reader",)]
    assert (
        result.notice is not None
        and "is a superuser (ad-hoc SQL allowed on it by --allow-privileged-sql)" in result.notice
    )


def test_an_operator_login_runs_without_a_note(operator_dsn: str, dsn: str) -> None:
    with psycopg.connect(operator_dsn, autocommit=True) as conn:
        result = run_read_only(conn, "SELECT current_user::text")
    assert result.rows == [("kestrel_reader",)] and result.notice is None


def test_shipped_reports_run_on_a_superuser_and_user_reports_do_not(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "mine.sql").write_text("-- description: mine\nSELECT count(*) AS n FROM workflow_executions\n")
    with psycopg.connect(dsn, autocommit=True) as conn:
        shipped = find_report("queue-depth", [])
        assert shipped.shipped and run_report(conn, shipped, bind_params(shipped, {})).columns
        mine = find_report("mine", [tmp_path])
        with pytest.raises(QueryRefused, match=r"is a superuser: ad-hoc SQL does not run"):
            run_report(conn, mine, bind_params(mine, {}))
        assert run_report(conn, mine, bind_params(mine, {}), allow_privileged=True).rows == [(0,)]


# -- bounds -------------------------------------------------------------------------------------


def test_each_query_runs_with_the_memory_and_temp_file_limits(operator_dsn: str) -> None:
    # migrate ran as a superuser (the test server's), so the reader role may set temp_file_limit.
    with psycopg.connect(operator_dsn, autocommit=True) as conn:
        result = run_read_only(conn, "SELECT current_setting('work_mem'), current_setting('temp_file_limit')")
        assert result.rows == [(read_only.READER_WORK_MEM, read_only.READER_TEMP_FILE_LIMIT)]
        # Undone with the transaction: the login's own session keeps its settings.
        assert conn.execute("SELECT current_setting('temp_file_limit')").fetchone() == ("-1",)


def test_a_query_past_the_temp_file_limit_is_stopped_by_the_server(operator_dsn: str, monkeypatch) -> None:
    # Small limits so a modest sort spills to disk and hits the limit quickly.
    monkeypatch.setattr(read_only, "READER_WORK_MEM", "64kB")
    monkeypatch.setattr(read_only, "READER_TEMP_FILE_LIMIT", "1MB")
    with psycopg.connect(operator_dsn, autocommit=True) as conn, pytest.raises(QueryFailed) as failed:
        run_read_only(conn, "SELECT g, md5(g::text) FROM generate_series(1, 200000) g ORDER BY 2")
    assert failed.value.sqlstate == "53400" and "temp_file_limit" in str(failed.value)


def test_the_timeout_is_at_most_ten_minutes(operator_dsn: str) -> None:
    with psycopg.connect(operator_dsn, autocommit=True) as conn:
        with pytest.raises(ValueError, match=r"at most 600000 ms \(10 minutes"):
            run_read_only(conn, "SELECT 1", timeout_ms=600_001)
        assert run_read_only(conn, "SHOW statement_timeout", timeout_ms=600_000).rows == [("10min",)]


# -- issue 44: every login with powers beyond the reader role's counts as privileged -------------

PREDEFINED_ROLES = r"SELECT rolname FROM pg_roles WHERE rolname LIKE 'pg\_%'"


def test_server_powers_hold_every_predefined_role_but_the_database_owner(dsn: str) -> None:
    """SERVER_POWERS, what the refusal checks, against the server's own predefined roles: one a
    newer PostgreSQL adds fails here until it is classified (the list names those of 16 to 18
    too, which an older server lacks). pg_database_owner is held by the database's owner,
    refused as an owner (below)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        predefined = {name for (name,) in conn.execute(PREDEFINED_ROLES)}
    assert predefined - {"pg_database_owner"} <= set(SERVER_POWERS)


def test_a_replication_login_is_refused(login) -> None:
    # Before: it ran (as kestrel_reader when granted, else as itself with a note); through the
    # encoding desync it created a permanent replication slot.
    target = login("REPLICATION", member_of="kestrel_reader")
    user = psycopg.conninfo.conninfo_to_dict(target)["user"]
    assert refused(target).startswith(f"login {user} has REPLICATION: ad-hoc SQL does not run on such a login")


@pytest.mark.parametrize("power", SERVER_POWERS)
def test_members_of_predefined_roles_with_server_powers_are_refused(login, dsn: str, power: str) -> None:
    # Before: ran; through the encoding desync a pg_signal_backend member killed a session.
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (power,)).fetchone() is None:
            pytest.skip(f"PostgreSQL {conn.info.server_version // 10000} has no role {power}")
    target = login("", member_of=power)
    user = psycopg.conninfo.conninfo_to_dict(target)["user"]
    assert refused(target) == (
        f"login {user} is a member of {power} (a predefined role with powers on the server): ad-hoc SQL does "
        "not run on such a login (its session can undo the read-only role); give the console a read-only "
        "login with --reader-dsn (or $KESTREL_READER_DSN), or pass --allow-privileged-sql"
    )


def test_membership_through_another_role_counts(login) -> None:
    group = psycopg.conninfo.conninfo_to_dict(login("NOINHERIT", member_of="pg_signal_backend"))["user"]
    member = login("", member_of=group)
    user = psycopg.conninfo.conninfo_to_dict(member)["user"]
    assert refused(member).startswith(f"login {user} is a member of pg_signal_backend")


def test_without_temp_file_rights_the_reader_role_is_refused(operator_dsn: str, dsn: str) -> None:
    # Issue 44, finding 5: every login that runs ad-hoc SQL runs it under temp_file_limit. A
    # reader role of its own, without the right (revoking it from the shared kestrel_reader
    # failed the tests running beside this one, whatever they read).
    login = psycopg.conninfo.conninfo_to_dict(operator_dsn)["user"]
    role = f"kt_reader_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(login)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA kestrel TO {}").format(sql.Identifier(role)))
    try:
        with psycopg.connect(operator_dsn, autocommit=True) as conn, pytest.raises(QueryRefused) as caught:
            run_read_only(conn, "SELECT 1", reader_role=role)
        assert caught.value.reason == (
            f"role {role} may not set temp_file_limit, which is unlimited here: a superuser must run "
            f"`kestrel-console migrate` (or GRANT SET ON PARAMETER temp_file_limit TO {role})"
        )
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_login_that_owns_a_kestrel_table_is_refused_like_a_superuser(dsn: str, login) -> None:
    """Issue 44, second review: the owner of the schema's tables (the migrating login, often
    the database's owner) ALTERs, DROPs and disables the triggers of every one of them; its
    session can leave the read-only role. Refused unless opted in, like a superuser; so is a
    login that may become the owner."""
    owner = login()
    name = psycopg.conninfo.conninfo_to_dict(owner)["user"]
    member = login("", member_of=name)
    member_name = psycopg.conninfo.conninfo_to_dict(member)["user"]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("GRANT kestrel_reader TO {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("ALTER TABLE kestrel.declarations OWNER TO {}").format(sql.Identifier(name)))
        try:
            assert refused(owner).startswith(f"login {name} owns table kestrel.declarations: ad-hoc SQL does not run")
            assert refused(member).startswith(f"login {member_name} may become role {name}, which owns table ")
            with psycopg.connect(owner, autocommit=True) as conn:
                result = run_read_only(conn, "SELECT current_user::text", allow_privileged=True)
            assert result.rows == [("kestrel_reader",)] and "owns table kestrel.declarations" in (result.notice or "")
        finally:
            admin.execute("ALTER TABLE kestrel.declarations OWNER TO CURRENT_USER")
            admin.execute(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
