"""`kestrel-console sql` as a user meets the guard."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from tests.cli.script import console


def sql(dsn: str, *args: str, cwd: Path, opt_in: bool = False) -> subprocess.CompletedProcess[str]:
    privileged = ["--allow-privileged-sql"] if opt_in else []
    return console(*privileged, "sql", *args, cwd=cwd, env={"KESTREL_DSN": dsn})


@pytest.fixture
def victim(dsn: str):
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def test_an_attribute_call_is_refused_with_the_function_named(
    dsn: str, victim: psycopg.Connection, tmp_path: Path
) -> None:
    pid = victim.info.backend_pid
    done = sql(
        dsn,
        f"SELECT 1 FROM workflow_executions e RIGHT JOIN (SELECT 1) s ON true WHERE ({pid}).pg_terminate_backend",
        cwd=tmp_path,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: refused: function pg_terminate_backend: "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert victim.execute("SELECT 1").fetchone() == (1,)

    text = sql(dsn, "SELECT ts_rewrite('a'::tsquery, 'SELECT pg_sleep(0)')", cwd=tmp_path)
    assert (text.returncode, text.stderr.strip()) == (1, "error: refused: function ts_rewrite: runs SQL given as text")


def test_the_superuser_note_and_the_byte_cut_go_to_stderr_and_json_stays_clean(dsn: str, tmp_path: Path) -> None:
    # Only with the opt-in does a superuser login run ad-hoc SQL (issue 18); the note marks it.
    done = sql(
        dsn,
        "--format",
        "json",
        "--max-bytes",
        "3000",
        "SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 10) g",
        cwd=tmp_path,
        opt_in=True,
    )
    assert done.returncode == 0, done.stderr
    assert [row["g"] for row in json.loads(done.stdout)] == [1, 2]
    notes = done.stderr.splitlines()
    assert (
        notes[0].startswith("note: login ")
        and " is a superuser (ad-hoc SQL allowed on it by --allow-privileged-sql): queries run as kestrel_reader"
        in notes[0]
    )
    assert notes[1] == "result cut at 3000 bytes (2 rows): narrow the query or raise --max-bytes"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--timeout", "inf"], "error: --timeout inf: it must be a finite number"),
        (["--max-bytes", "0"], "--max-bytes"),
    ],
)
def test_bad_limits_are_bad_usage(dsn: str, tmp_path: Path, args: list[str], message: str) -> None:
    done = sql(dsn, *args, "SELECT 1", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr and "Traceback" not in done.stderr


# An admin's helper in `public` (EXECUTE granted to PUBLIC by default, SECURITY DEFINER): it kills
# the session whose pid it is given. Before issue 9's red team, `(pid).kt_kill` passed the guard
# (an attribute the catalog does not know was taken for a column) and ran.
ADMIN_HELPER = """
CREATE OR REPLACE FUNCTION public.kt_kill(integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_terminate_backend($1)';
CREATE OR REPLACE FUNCTION public.kt_kill_eq(integer, integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_terminate_backend($1)';
DROP OPERATOR IF EXISTS public.=== (integer, integer);
CREATE OPERATOR public.=== (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.kt_kill_eq);
"""


@pytest.fixture
def operator_login(dsn: str) -> Iterator[str]:
    """DSN of a LOGIN granted kestrel_operator, as docs/operations.md recommends (roles are
    cluster-wide: random name, dropped)."""
    name = f"kt_op_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(ADMIN_HELPER)
        admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE kestrel_operator").format(pgsql.Identifier(name)))
    yield make_conninfo(dsn, user=name)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
        admin.execute(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(name)))


def test_an_operator_login_cannot_reach_an_admins_helper_in_public(
    operator_login: str,
    victim: psycopg.Connection,
    tmp_path: Path,
) -> None:
    pid = victim.info.backend_pid
    attribute = sql(operator_login, f"SELECT ({pid}).kt_kill", cwd=tmp_path)
    assert (attribute.returncode, attribute.stdout) == (1, "")
    assert attribute.stderr.strip() == (
        "error: column notation .kt_kill applied to type integer, which is not a composite type"
    )
    operator = sql(operator_login, f"SELECT {pid} OPERATOR(public.===) 0", cwd=tmp_path)
    assert (operator.returncode, operator.stdout) == (1, "")
    assert operator.stderr.startswith("error: refused: operator public.===: only pg_catalog operators"), operator.stderr
    assert victim.execute("SELECT 1").fetchone() == (1,)  # not terminated
