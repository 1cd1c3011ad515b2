"""The read-only commands (status, list, show, report, sql) on a fresh and on a seeded database:
every format parsed back, exit codes 0/1/2, and the stderr message of every error case."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from kestrel_console.cli.read_commands import LIST_COLUMNS, STATUS_COLUMNS, TIMELINE_COLUMNS
from kestrel_core import STATUSES
from tests.cli.script import console
from tests.console.reports.test_reports import SHIPPED as SHIPPED_REPORTS
from tests.seed import SeedFacts, seed_history

UNREACHABLE = "host=127.0.0.1 port=1 user=postgres dbname=postgres connect_timeout=2"


@pytest.fixture
def run(dsn: str, reader_dsn: str):
    """Run kestrel-console on the test database; returns the finished command. Ad-hoc SQL and
    reports run on a reader login (the tests' own login is a superuser, refused for them)."""
    env = {"COLUMNS": "160", "KESTREL_READER_DSN": reader_dsn}

    def invoke(*args: str, target: str | None = None):
        return console("--dsn", target or dsn, *(["--reader-dsn", target] if target else []), *args, env=env)

    return invoke


@pytest.fixture
def facts(db: psycopg.Connection) -> SeedFacts:
    return seed_history(db)


def as_json(result) -> list[dict]:
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, list) and all(isinstance(row, dict) for row in data)
    return data


def as_csv(result) -> tuple[list[str], list[dict[str, str]]]:
    assert result.returncode == 0, result.stdout + result.stderr
    reader = csv.reader(io.StringIO(result.stdout))
    header = next(reader)
    return header, [dict(zip(header, row)) for row in reader]


def failed(result, message: str) -> None:
    """Exit 1, the message on stderr after 'error: ', nothing on stdout, no traceback."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


def db_now(db) -> datetime:
    return db.execute("SELECT now()").fetchone()[0]


# -- a fresh database ----------------------------------------------------------------------------


def test_every_command_on_a_fresh_database(run) -> None:
    assert as_json(run("status", "--format", "json")) == []
    assert as_csv(run("status", "--format", "csv")) == (STATUS_COLUMNS, [])
    table = run("status")
    assert table.returncode == 0 and "no executions yet" in table.stdout
    assert "Stuck leases" in table.stdout and "Pending approvals" in table.stdout

    assert as_json(run("list", "--format", "json")) == []
    assert as_csv(run("list", "--format", "csv")) == (LIST_COLUMNS, [])
    assert "no executions match" in run("list").stdout

    failed(run("show", "1"), "no execution with id 1")

    listing = as_json(run("report", "--format", "json"))
    assert SHIPPED_REPORTS <= {r["name"] for r in listing}
    assert as_json(run("report", "queue-depth", "--format", "json")) == []

    assert as_json(run("sql", "SELECT 1 AS one, 'x' AS two", "--format", "json")) == [{"one": 1, "two": "x"}]
    assert as_csv(run("sql", "SELECT count(*) AS n FROM workflow_executions", "--format", "csv")) == (
        ["n"],
        [{"n": "0"}],
    )


# -- status --------------------------------------------------------------------------------------


def test_status_on_seeded_history(run, db, facts: SeedFacts) -> None:
    rows = as_json(run("status", "--format", "json"))
    assert [r["workflow_name"] for r in rows] == ["billing-sync", "remediate"]
    now = db_now(db)
    for row in rows:
        mine = [e for e in facts.executions.values() if e.workflow_name == row["workflow_name"]]
        per_status = Counter(e.status for e in mine)
        assert {s: row[s] for s in STATUSES} == {s: per_status.get(s, 0) for s in STATUSES}
        assert row["total"] == len(mine)
        assert row["stuck_leases"] == sum(1 for e in mine if e.status == "running" and e.lease_expires < now)
        assert row["pending_approvals"] == sum(
            1 for w in facts.pending_approvals() if w.workflow_name == row["workflow_name"]
        )
        assert row["live_workers"] == sum(
            1
            for w in facts.workers
            if row["workflow_name"] in w.workflows
            and w.stopped_at is None
            and now - w.last_heartbeat < timedelta(seconds=30)
        )
        assert set(row) == set(STATUS_COLUMNS)

    header, csv_rows = as_csv(run("status", "--format", "csv"))
    assert header == STATUS_COLUMNS
    assert csv_rows == [{k: str(v) for k, v in r.items()} for r in rows]

    table = run("status").stdout
    assert "Queue depth by workflow and status" in table
    assert "worker-dead" in table  # the stuck lease and the silent worker
    assert str(facts.id("pending_approval")) in table and "approve-fix" in table
    assert "no worker registered" not in table


def test_status_names_workflows_no_live_worker_registered(run, app, facts: SeedFacts) -> None:
    app.enqueue("orphan", {"x": 1})
    table = run("status")
    assert table.returncode == 0
    assert re.search(
        r"no worker registered: workflow 'orphan' has 1 enqueued .* but no live worker runs it", table.stdout
    )
    rows = {r["workflow_name"]: r for r in as_json(run("status", "--format", "json"))}
    assert rows["orphan"]["enqueued"] == 1 and rows["orphan"]["live_workers"] == 0


# -- list ----------------------------------------------------------------------------------------


def test_list_filters_and_formats(run, facts: SeedFacts) -> None:
    newest_first = sorted(facts.executions.values(), key=lambda e: -e.id)
    rows = as_json(run("list", "--format", "json"))
    assert [r["id"] for r in rows] == [e.id for e in newest_first]
    assert list(rows[0]) == LIST_COLUMNS
    first = newest_first[0]
    assert rows[0]["created_at"] == first.created_at.isoformat()
    assert rows[0]["status"] == first.status and rows[0]["workflow_name"] == first.workflow_name

    errors = as_json(run("list", "--status", "error", "--format", "json"))
    assert [r["id"] for r in errors] == [e.id for e in newest_first if e.status == "error"]
    billing = as_json(run("list", "--workflow", "billing-sync", "--limit", "3", "--format", "json"))
    assert [r["id"] for r in billing] == [e.id for e in newest_first if e.workflow_name == "billing-sync"][:3]

    header, csv_rows = as_csv(run("list", "--status", "waiting", "--format", "csv"))
    assert header == LIST_COLUMNS
    assert [int(r["id"]) for r in csv_rows] == [e.id for e in newest_first if e.status == "waiting"]
    assert {r["current_step"] for r in csv_rows} == {"approve-fix", "cool-down"}

    table = run("list", "--status", "error")
    assert table.returncode == 0
    assert "step 'fetch' failed 2 times" in table.stdout
    # durations are human-readable: failed_last_hour ran 5 minutes, failed_old 30 seconds
    assert "5 m 00 s" in table.stdout and "30 s" in table.stdout


# -- show ----------------------------------------------------------------------------------------


def bar_length(line: str) -> int:
    return line.count("█") + line.count("░")


def test_show_prints_the_timeline_scaled_to_the_span(run, facts: SeedFacts) -> None:
    eid = facts.id("approved")
    result = run("show", str(eid))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith(f"execution {eid}  remediate  success  6 m 00 s")
    lines = [line for line in out.splitlines() if "▕" in line]
    expected = sorted(
        [(a.started_at, a.step_id) for a in facts.attempts_of("approved")]
        + [(w.created_at, w.step_id) for w in facts.waits_of("approved")]
    )
    assert [line.split()[0] for line in lines] == [step for _, step in expected]
    fix = [line for line in lines if line.startswith("fix ")]
    assert [re.search(r"\s(\d/\d)\s", line).group(1) for line in fix] == ["1/3", "2/3", "3/3"]
    assert "error" in fix[0] and "success" in fix[2]
    assert out.count("↳ TimeoutError: kubectl timed out") == 2
    gate = next(line for line in lines if line.startswith("approve-fix"))
    assert "approved by alice" in gate and "4 m 00 s" in gate
    # the gate waited 4 of the 6 minutes: the longest bar, about 2/3 of the axis
    width = len(lines[0].split("▕")[1].split("▏")[0])
    assert bar_length(gate) == max(bar_length(line) for line in lines)
    assert abs(bar_length(gate) - width * 4 / 6) <= 2
    assert "blocked" not in out


def test_show_json_and_csv(run, facts: SeedFacts) -> None:
    eid = facts.id("pending_approval")
    [doc] = as_json(run("show", str(eid), "--format", "json"))
    seeded = facts.executions["pending_approval"]
    assert (doc["id"], doc["status"], doc["input"]) == (eid, "waiting", seeded.input)
    assert doc["created_at"] == seeded.created_at.isoformat()
    assert doc["blocker"].startswith("it waits for approval 'approve-fix' since")
    assert [s["step_id"] for s in doc["steps"]] == ["rca", "fix"]
    assert [(t["kind"], t["step_id"], t["outcome"]) for t in doc["timeline"]] == [
        ("step", "rca", "success"),
        ("step", "fix", "success"),
        ("approval", "approve-fix", "waiting"),
    ]

    header, rows = as_csv(run("show", str(facts.id("failed_last_hour")), "--format", "csv"))
    assert header == TIMELINE_COLUMNS
    attempts = facts.attempts_of("failed_last_hour")
    assert [(r["step_id"], r["attempt"], r["outcome"], r["error"]) for r in rows] == [
        (a.step_id, str(a.attempt), a.outcome, a.error) for a in attempts
    ]
    assert {r["execution_id"] for r in rows} == {str(facts.id("failed_last_hour"))}
    assert [float(r["duration_s"]) for r in rows] == [a.seconds for a in attempts]

    blocked = run("show", str(facts.id("stuck"))).stdout
    assert "blocked: the lease is held by worker 'worker-dead'" in " ".join(blocked.split())


# -- report --------------------------------------------------------------------------------------


def test_report_lists_and_runs_and_says_which_file(run, db, facts: SeedFacts) -> None:
    listing = {r["name"]: r for r in as_json(run("report", "--format", "json"))}
    assert SHIPPED_REPORTS <= set(listing)
    since = listing["errors-this-month"]["params"][0]
    assert since == {"name": "since", "type": "interval", "default": "1 month"}
    header, rows = as_csv(run("report", "--format", "csv"))
    assert header == ["name", "description", "params", "path", "shipped", "overrides"]
    assert {r["name"] for r in rows} == set(listing)
    assert "errors-this-month" in run("report").stdout

    result = run("report", "errors-this-month", "--param", "since=7 days", "--format", "json")
    now = db_now(db)
    assert sorted(r["id"] for r in as_json(result)) == sorted(
        e.id for e in facts.with_status("error") if e.finished_at > now - timedelta(days=7)
    )
    assert re.search(r"report errors-this-month: ran \S+queries.*errors-this-month\.sql \(shipped\)", result.stderr)


def test_user_report_overrides_the_shipped_one(dsn: str, reader_dsn: str, tmp_path: Path) -> None:
    # Wide enough for the listing's path column: under pytest-xdist tmp_path is longer.
    wide = {"COLUMNS": "400"}
    (tmp_path / "errors-this-month.sql").write_text("-- description: mine\nSELECT 42 AS answer\n")
    result = console(
        "--reader-dsn",
        reader_dsn,
        "--queries",
        str(tmp_path),
        "report",
        "errors-this-month",
        "--format",
        "csv",
        env=wide,
        dsn=dsn,
    )
    assert as_csv(result) == (["answer"], [{"answer": "42"}])
    assert f"ran {tmp_path / 'errors-this-month.sql'} (user)" in result.stderr
    listing = console("--queries", str(tmp_path), "report", env=wide, dsn=dsn)
    assert "(overrides the shipped one)" in listing.stdout
    from_env = console(
        "--reader-dsn",
        reader_dsn,
        "report",
        "errors-this-month",
        "--format",
        "json",
        env={**wide, "KESTREL_QUERIES": str(tmp_path)},
        dsn=dsn,
    )
    assert as_json(from_env) == [{"answer": 42}]


def test_report_table_and_truncation(run, facts: SeedFacts) -> None:
    result = run("report", "pending-approvals")
    assert result.returncode == 0 and "approve-fix" in result.stdout
    many = run("report", "errors-this-month", "--param", "since=1 year", "--max-rows", "1", "--format", "json")
    assert len(as_json(many)) == 1
    assert "only the first 1 rows are shown" in many.stderr


# -- sql -----------------------------------------------------------------------------------------


def test_sql_formats_and_row_limit(run, facts: SeedFacts) -> None:
    query = "SELECT id, workflow_name, status, input, created_at FROM workflow_executions ORDER BY id"
    rows = as_json(run("sql", query, "--format", "json"))
    by_id = sorted(facts.executions.values(), key=lambda e: e.id)
    assert [(r["id"], r["status"], r["input"], r["created_at"]) for r in rows] == [
        (e.id, e.status, e.input, e.created_at.isoformat()) for e in by_id
    ]
    header, csv_rows = as_csv(run("sql", query, "--format", "csv"))
    assert header == ["id", "workflow_name", "status", "input", "created_at"]
    assert [json.loads(r["input"]) for r in csv_rows] == [e.input for e in by_id]
    table = run("sql", query)
    assert table.returncode == 0 and "billing-sync" in table.stdout
    assert f"{len(by_id)} row(s) in" in table.stderr
    cut = run("sql", query, "--max-rows", "3", "--format", "json")
    assert [r["id"] for r in as_json(cut)] == [e.id for e in by_id[:3]]
    assert "only the first 3 rows are shown" in cut.stderr


def test_sql_table_prints_values_and_names_as_they_are(run) -> None:
    result = run("sql", """SELECT '[/red] x [bold]' AS "[/b]", 1 AS n""")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[/red] x [bold]" in result.stdout and "[/b]" in result.stdout
    empty = run("sql", "SELECT 1 AS n, 'a' AS b WHERE false")
    assert empty.returncode == 0 and empty.stdout.split() == ["n", "b", "(no", "rows)"]


def test_sql_timeout(run) -> None:
    failed(run("sql", "SELECT pg_sleep(3)", "--timeout", "0.2"), "cancelled after 0.2 s")


# -- errors --------------------------------------------------------------------------------------


def test_refused_sql_prints_the_reason_and_changes_nothing(run, db, facts: SeedFacts) -> None:
    before = db.execute("SELECT count(*) FROM workers").fetchone()[0]
    failed(
        run("sql", "WITH gone AS (DELETE FROM workers RETURNING *) SELECT * FROM gone"),
        "refused: data-modifying CTE: DELETE",
    )
    failed(run("sql", "DELETE FROM workers"), "refused:")
    failed(run("sql", "SELECT pg_terminate_backend(1)"), "pg_terminate_backend")
    assert db.execute("SELECT count(*) FROM workers").fetchone()[0] == before
    failed(run("sql", "SELECT * FROM no_such_table"), 'relation "no_such_table" does not exist')


def test_unknown_execution_and_report_and_bad_params(run, facts: SeedFacts) -> None:
    failed(run("show", "99999"), "no execution with id 99999")
    result = run("report", "nope")
    failed(result, "no report named 'nope'")
    assert "errors-this-month" in result.stderr  # lists what exists
    failed(
        run("report", "errors-this-month", "--param", "bogus=1"), "report 'errors-this-month' has no parameter 'bogus'"
    )
    failed(
        run("report", "errors-this-month", "--param", "since=soon"),
        "parameter 'since' of report 'errors-this-month' expects an interval, got 'soon'",
    )
    failed(run("report", "errors-this-month", "--param", "since"), "bad --param 'since': write it as KEY=VALUE")
    failed(run("report", "throughput", "--param", "minutes=1", "--param", "minutes=2"), "given twice")


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("list",),
        ("show", "1"),
        ("report", "queue-depth"),
        ("sql", "SELECT 1"),
    ],
)
def test_unreachable_database(run, args: tuple[str, ...]) -> None:
    result = run(*args, target=UNREACHABLE)
    failed(result, "cannot connect to PostgreSQL at postgres@127.0.0.1:1/postgres")
    assert "Check --dsn / $KESTREL_DSN" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--format", "xml"),
        ("list", "--format", "yaml"),
        ("show", "1", "--format", "html"),
        ("report", "--format", "tsv"),
        ("sql", "SELECT 1", "--format", "text"),
        ("list", "--status", "done"),
        ("list", "--limit", "0"),
        ("show", "abc"),
        ("sql",),
    ],
)
def test_bad_usage_exits_2(run, args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_bad_format_names_the_choices(run) -> None:
    result = run("list", "--format", "xml")
    assert "'xml' is not one of table, json, csv" in " ".join(result.stderr.replace("│", " ").split())


# -- the installed script ------------------------------------------------------------------------


def test_installed_script_runs(dsn: str, facts: SeedFacts, tmp_path: Path) -> None:
    # The script pip installed beside the interpreter running the tests, wherever the venv is.
    env = {"KESTREL_DSN": dsn}
    done = console("list", "--status", "error", "--format", "json", env=env, cwd=tmp_path, subprocess=True)
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in json.loads(done.stdout)] == [e.id for e in reversed(facts.with_status("error"))]
    down = console("--dsn", UNREACHABLE, "status", env=env, cwd=tmp_path, subprocess=True)
    assert down.returncode == 1 and down.stdout == ""
    assert down.stderr.startswith("error: cannot connect to PostgreSQL") and "Traceback" not in down.stderr


def test_a_seconds_column_holding_nan_or_infinity_is_printed_not_a_traceback(run) -> None:
    # *_s columns are shown as durations; float8 also holds 'NaN' and 'Infinity'.
    result = run("sql", "SELECT 'NaN'::float8 AS wait_s, '-Infinity'::float8 AS age_s, 2.5::float8 AS run_s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[2].split() == ["nan", "-inf", "2.5", "s"]
