"""Issue 44, finding 2: names are resolved against the live catalog, not a shipped list.

Before, attribute notation ``(x).f`` was refused only when ``f`` was in the shipped list of
catalog functions, operators were checked by name against pg_catalog's, and relations not at
all: an admin's SECURITY DEFINER helper in the Kestrel schema (everyone may EXECUTE a new
function unless its owner revokes it) ran as ``(pid).kill_session`` and killed a session, as
the reader role; ``'a'::text + 'b'::text`` ran an admin's operator as its owner; a view whose
rules call such a function ran it. Every test here failed on the code before the fix: the
victim session died or the function ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from kestrel_console.adhoc import QueryRefused, run_read_only
from tests.cli.script import console
from tests.conftest import KeptSessions
from tests.console.adhoc.session_killers import session_killers
from tests.console.adhoc.test_privileged_login import login  # noqa: F401 (the fixture)

# An admin's helpers (session_killers): the concatenation kills the victim before it returns.
NOISY_CONCAT = """LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN PERFORM pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kt-victim';
RETURN a || b; END $$"""


@pytest.fixture
def helpers(dsn: str) -> Iterator[None]:
    with session_killers(dsn, "kt-victim", "noisy_concat", NOISY_CONCAT):
        yield


@pytest.fixture
def victim(dsn: str, sessions: KeptSessions) -> psycopg.Connection:
    return sessions.session(dsn, "victim", options="-c application_name=kt-victim")


def alive(conn: psycopg.Connection) -> bool:
    try:
        return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def attacks(pid: int) -> list[tuple[str, str]]:
    """(query, the start of its refusal)."""
    return [
        (f"SELECT ({pid}).kill_session", "function kestrel.kill_session(integer): the query may resolve"),
        (f"SELECT (p.pid).kill_session FROM (SELECT {pid} AS pid) AS p", "function kestrel.kill_session(integer)"),
        ("SELECT 'a'::text + 'b'::text", "operator kestrel.+(text,text) (function kestrel.noisy_concat)"),
        (
            "SELECT * FROM session_killer",
            "view kestrel.session_killer runs what a query may not: function pg_terminate_backend",
        ),
        ("SELECT count(*) FROM kestrel.session_killer", "view kestrel.session_killer runs what"),
        ("SELECT * FROM pg_catalog.pg_class c JOIN session_killer k ON true", "view kestrel.session_killer"),
    ]


def test_an_admins_helpers_in_the_kestrel_schema_are_refused(
    helpers: None, operator_dsn: str, victim: psycopg.Connection
) -> None:
    with psycopg.connect(operator_dsn, autocommit=True) as conn:
        for query, reason in attacks(victim.info.backend_pid):
            with pytest.raises(QueryRefused) as refused:
                run_read_only(conn, query)
            assert refused.value.reason.startswith(reason), (query, refused.value.reason)
            assert alive(victim), query
        # What is not the admin's runs as before.
        ok = run_read_only(conn, "SELECT 'a'::text || 'b'::text AS ab, count(*) AS n FROM workflow_executions")
        assert ok.rows == [("ab", 0)]


def test_the_same_from_the_cli_a_report_and_as_the_opted_in_superuser(
    helpers: None, dsn: str, operator_dsn: str, victim: psycopg.Connection, tmp_path: Path
) -> None:
    for query, reason in attacks(victim.info.backend_pid):
        done = console("sql", query, env={"KESTREL_DSN": operator_dsn})
        assert (done.returncode, done.stdout) == (1, ""), (query, done)
        assert done.stderr.startswith(f"error: refused: {reason}") and len(done.stderr.splitlines()) == 1, done.stderr
        done = console("--allow-privileged-sql", "sql", query, env={"KESTREL_DSN": dsn})
        assert done.returncode == 1 and done.stderr.startswith(f"error: refused: {reason}"), done.stderr
        assert alive(victim), query
    (tmp_path / "kill.sql").write_text(f"-- description: kill\nSELECT ({victim.info.backend_pid}).kill_session\n")
    ran = console("--queries", str(tmp_path), "report", "kill", env={"KESTREL_DSN": operator_dsn})
    assert ran.returncode == 1 and ran.stderr.startswith("error: refused: function kestrel.kill_session(integer)"), ran
    assert alive(victim)


async def test_the_same_on_the_tui_sql_screen(helpers: None, operator_dsn: str, victim: psycopg.Connection) -> None:
    from kestrel_console.tui.screens.sql import SqlScreen
    from tests.console.tui.helpers import SIZE, open_screen
    from tests.console.tui.helpers import console as tui_console
    from tests.console.tui.test_sql import run

    tui = tui_console(operator_dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "4", SqlScreen)
        for query, reason in attacks(victim.info.backend_pid)[:4]:
            screen.message = ""
            message = await run(pilot, screen, query)
            assert message.startswith(f"refused: {reason}"), (query, message)
    assert alive(victim)


def test_a_worker_login_does_not_run_ad_hoc_sql(dsn: str, login) -> None:
    worker = login("", member_of="kestrel_worker")
    name = conninfo_to_dict(worker)["user"]
    done = console("sql", "SELECT (1).ensure_partitions", env={"KESTREL_DSN": worker})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == (
        f"error: refused: login {name} may not assume role kestrel_reader (ask an admin for: GRANT kestrel_reader "
        f"TO {name}): ad-hoc SQL runs only as the read-only role kestrel_reader"
    )
