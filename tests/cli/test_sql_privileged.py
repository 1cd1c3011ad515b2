"""Issue 18 where a user meets it: `sql` and `report` on a superuser login, with a reader login
or the marked opt-in; the string-continuation shapes refused by `sql` and by a report from a
`--queries` folder, as a superuser and as an operator login; `--timeout` beyond ten minutes.

Before the fix: the superuser's `sql` and user reports ran (exit 0), and every shape ran too.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.cli.script import console
from tests.console.adhoc.hostile_sql import SHAPES

QUERY = "SELECT current_user::text AS who, count(*) AS n FROM workflow_executions"


def refusal_line(user: str) -> str:
    return (
        f"error: refused: login {user} is a superuser: ad-hoc SQL does not run on such a login (its "
        "session can undo the read-only role); give the console a read-only login with --reader-dsn "
        "(or $KESTREL_READER_DSN), or pass --allow-privileged-sql"
    )


@pytest.fixture
def my_reports(tmp_path: Path) -> Path:
    (tmp_path / "mine.sql").write_text("-- description: mine\n" + QUERY + "\n")
    return tmp_path


def test_a_superuser_console_refuses_sql_and_user_reports_in_one_line(dsn: str, my_reports: Path) -> None:
    user = conninfo_to_dict(dsn)["user"]
    for done in (
        console("sql", QUERY, dsn=dsn),
        console("--queries", str(my_reports), "report", "mine", dsn=dsn),
        console("report", "mine", dsn=dsn, env={"KESTREL_QUERIES": str(my_reports)}),
    ):
        assert (done.returncode, done.stdout, done.stderr) == (1, "", refusal_line(user) + "\n")
    shipped = console("report", "queue-depth", "--format", "json", dsn=dsn)  # the package's own: runs
    assert shipped.returncode == 0 and shipped.stdout.startswith("["), shipped.stderr


def test_with_a_reader_login_sql_and_reports_run_as_the_reader(dsn: str, reader_dsn: str, my_reports: Path) -> None:
    for done in (
        console("--reader-dsn", reader_dsn, "sql", "--format", "csv", QUERY, dsn=dsn),
        console("sql", "--format", "csv", QUERY, dsn=dsn, env={"KESTREL_READER_DSN": reader_dsn}),
        console("--reader-dsn", reader_dsn, "--queries", str(my_reports), "report", "mine", "--format", "csv", dsn=dsn),
    ):
        assert (done.returncode, done.stdout) == (0, "who,n\nkestrel_reader,0\n"), done.stderr
        assert "note:" not in done.stderr


def test_the_opt_in_runs_and_marks_the_result(dsn: str) -> None:
    done = console("--allow-privileged-sql", "sql", "--format", "csv", QUERY, dsn=dsn)
    assert (done.returncode, done.stdout) == (0, "who,n\nkestrel_reader,0\n"), done.stderr
    assert "is a superuser (ad-hoc SQL allowed on it by --allow-privileged-sql)" in done.stderr


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["report", "queue-depth"]])
def test_a_timeout_beyond_ten_minutes_is_bad_usage(dsn: str, command: list[str]) -> None:
    done = console(*command, "--timeout", "601", dsn=dsn)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.strip() == (
        "error: --timeout 601: it must be at most 600000 ms (10 minutes: ad-hoc SQL and reports are for a console)"
    )
    assert console("--allow-privileged-sql", *command, "--timeout", "600", dsn=dsn).returncode == 0


NO_SLOT = "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'kt_slot'"


@pytest.mark.parametrize("who", ["superuser", "operator"])
def test_the_string_continuation_shapes_are_refused_by_sql_and_reports(
    who: str,
    dsn: str,
    operator_dsn: str,
    tmp_path: Path,
    db: psycopg.Connection,
) -> None:
    # The superuser opts in, so that only the guard stands between the shape and its code.
    args = ["--dsn", dsn, "--allow-privileged-sql"] if who == "superuser" else ["--dsn", operator_dsn]
    for n, (query, name) in enumerate(SHAPES):
        (tmp_path / f"shape-{n}.sql").write_text(f"-- description: shape {n}\n{query}\n")
    for n, (query, name) in enumerate(SHAPES):
        for command in (["sql", query], ["--queries", str(tmp_path), "report", f"shape-{n}"]):
            done = console(*args, *command)
            assert (done.returncode, done.stdout) == (1, ""), (query, done.stdout, done.stderr)
            assert done.stderr.startswith((f"error: refused: function {name}: ", "error: refused: cannot parse: ")), (
                query,
                done.stderr,
            )
            assert len(done.stderr.strip().splitlines()) == 1
    assert db.execute(NO_SLOT).fetchone() == (0,)


def test_replication_and_signal_backend_logins_are_refused_by_sql_and_report(dsn: str, my_reports: Path) -> None:
    # Issue 44, finding 4: before, both ran ad-hoc SQL (exit 0) as kestrel_reader.
    import uuid

    from psycopg import sql as pgsql

    names = {"REPLICATION": f"kt_repl_{uuid.uuid4().hex[:8]}", "": f"kt_sig_{uuid.uuid4().hex[:8]}"}
    with psycopg.connect(dsn, autocommit=True) as admin:
        for attributes, name in names.items():
            admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN " + attributes).format(pgsql.Identifier(name)))
            admin.execute(pgsql.SQL("GRANT kestrel_reader TO {}").format(pgsql.Identifier(name)))
        admin.execute(pgsql.SQL("GRANT pg_signal_backend TO {}").format(pgsql.Identifier(names[""])))
    try:
        expected = {
            names["REPLICATION"]: "has REPLICATION",
            names[""]: "is a member of pg_signal_backend (a predefined role with powers on the server)",
        }
        for name, what in expected.items():
            login_dsn = psycopg.conninfo.make_conninfo(dsn, user=name)
            for done in (
                console("sql", QUERY, dsn=login_dsn),
                console("--queries", str(my_reports), "report", "mine", dsn=login_dsn),
            ):
                assert (done.returncode, done.stdout) == (1, ""), done
                assert done.stderr.startswith(f"error: refused: login {name} {what}: ad-hoc SQL does not run"), done
                assert len(done.stderr.splitlines()) == 1
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            for name in names.values():
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
                admin.execute(pgsql.SQL("DROP ROLE {}").format(pgsql.Identifier(name)))
