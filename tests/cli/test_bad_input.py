"""Bad input docs/guarantees.md promises a clear answer for: one `error:` line, exit 2 (bad
usage), no traceback, nothing written (issue 9)."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from tests.cli.script import console, one_clear_line

HUGE = "99999999999999999999"  # past bigint


def executions(db: psycopg.Connection) -> int:
    return db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0]


@pytest.mark.parametrize(
    "args, needles",
    [
        (["enqueue", "x", "--input", '"\\ud800"'], ["--input", "lone surrogate"]),
        (["enqueue", "x", "--input", '{"a": "\\u0000"}'], ["--input", "NUL"]),
        (["enqueue", "x", "--input", "[" * 60_000 + "]" * 60_000], ["--input", "nested too deeply"]),
        (["enqueue", "x", "--delay", "1e12"], ["--delay", "3650 days"]),
        (["enqueue", "x", "--delay", "nan"], ["--delay"]),
        (["enqueue", "x", "--priority", "99999999999"], ["priority", "2147483647"]),
        (["enqueue", ""], ["workflow name", "non-empty"]),
        (["enqueue", "   "], ["workflow name", "non-empty"]),
        (["enqueue", "w" * 10_000], ["workflow name too long", "10000 characters", "limit is 200"]),
    ],
)
def test_enqueue_refuses_bad_input_and_writes_nothing(dsn: str, db: psycopg.Connection, args, needles) -> None:
    done = console(*args, dsn=dsn)
    message = one_clear_line(done, 2, *needles)
    assert message.startswith("error: ") and message.count("\n") == 1, message
    assert done.stdout == ""
    assert executions(db) == 0


@pytest.mark.parametrize(
    "option, what",
    [
        ("--idempotency-key", "an idempotency key"),
        ("--queue", "a queue name"),
        ("--concurrency-key", "a concurrency key"),
    ],
)
def test_an_over_long_key_or_queue_name_is_bad_usage_not_an_unreachable_database(
    dsn: str,
    db: psycopg.Connection,
    option: str,
    what: str,
) -> None:
    """Issue 18: 10,000 characters overflowed a btree entry, and the error read 'cannot connect
    to PostgreSQL' (DatabaseUnavailable, which a caller retries forever)."""
    done = console("enqueue", "x", option, secrets.token_hex(5_000), dsn=dsn)
    one_clear_line(done, 2, f"{what} is too long", "10000 characters", "limit is 500")
    assert "cannot connect" not in done.stderr
    assert executions(db) == 0


@pytest.mark.parametrize(
    "args, needles",
    [
        (["prune", "--older-than", "99999999999d"], ["--older-than", "too long", "36500 days"]),
        (["prune", "--older-than", "99999999999d", "--dry-run"], ["--older-than", "too long"]),
        (["worker", "tests.core.crash_app", "--lease", "inf"], ["--lease inf", "from 1 to 86400"]),
        (["worker", "tests.core.crash_app", "--lease", "nan"], ["--lease nan", "from 1 to 86400"]),
        (["worker", "tests.core.crash_app", "--prune-older-than", "99999999999d"], ["--prune-older-than", "too long"]),
    ],
)
def test_an_age_or_lease_out_of_range_is_one_line_and_bad_usage(
    dsn: str, db: psycopg.Connection, args, needles
) -> None:
    """Issue 18: these were OverflowError tracebacks."""
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, finished_at)"
        " VALUES ('w', 'success', now() - interval '60 days')"
    )
    done = console(*args, dsn=dsn)
    message = one_clear_line(done, 2, *needles)
    assert message.count("\n") == 1, message
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (1,)


@pytest.mark.parametrize(
    "args",
    [
        ["show", HUGE],
        ["approve", HUGE, "gate"],
        ["reject", HUGE, "gate"],
        ["cancel", HUGE],
        ["requeue", HUGE],
        ["cancel", "0"],
    ],
)
def test_an_id_beyond_bigint_is_bad_usage(dsn: str, db: psycopg.Connection, args) -> None:
    db.execute("INSERT INTO workflow_executions (workflow_name, status) VALUES ('w', 'error')")
    done = console(*args, dsn=dsn)
    one_clear_line(done, 2, "no execution can have id", "9223372036854775807")
    assert "does not exist" not in done.stderr
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)
    assert db.execute("SELECT status FROM workflow_executions").fetchall() == [("error",)]


@pytest.mark.parametrize(
    "args",
    [
        ["sql", "SELECT 1", "--max-rows", HUGE],
        ["report", "queue-depth", "--max-rows", HUGE],
        ["sql", "SELECT 1", "--max-rows", "0"],
    ],
)
def test_max_rows_out_of_range_is_bad_usage(dsn: str, args) -> None:
    done = console(*args, dsn=dsn)
    one_clear_line(done, 2, "--max-rows", "1,000,000")
    assert done.stdout == ""


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["report", "queue-depth"]], ids=["sql", "report"])
@pytest.mark.parametrize(
    "limit",
    [
        ["--timeout", "0.0005"],
        ["--timeout", "0"],
        ["--timeout", "nan"],
        ["--timeout", "inf"],
        ["--max-bytes", "0"],
        ["--max-bytes", "-1"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_limit_that_would_mean_no_limit_is_bad_usage(dsn: str, command: list[str], limit: list[str]) -> None:
    # A timeout below 1 ms would become statement_timeout 0 (none); a byte bound of 0 none.
    done = console(*command, *limit, dsn=dsn)
    one_clear_line(done, 2, limit[0])
    assert done.stdout == ""


def schedules(db: psycopg.Connection) -> int:
    return db.execute("SELECT count(*) FROM schedules").fetchone()[0]


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--input", '{"a": "\\ud800"}'], ["--input", "lone surrogate"]),
        (["--input", '{"a": ' + "[" * 60_000 + "]" * 60_000 + "}"], ["--input", "nested too deeply"]),
        (["--input", '{"a": "\\u0000"}'], ["--input", "NUL"]),
    ],
)
def test_schedule_add_refuses_bad_input_and_writes_nothing(dsn: str, db: psycopg.Connection, args, needles) -> None:
    # The same --input checks as enqueue (they were a traceback here).
    done = console("schedule", "add", "nightly", "0 3 * * *", "report", *args, dsn=dsn)
    message = one_clear_line(done, 2, *needles)
    assert message.startswith("error: ") and message.count("\n") == 1, message
    assert schedules(db) == 0


@pytest.mark.parametrize("workflow, needle", [("w" * 10_000, "workflow name too long"), ("", "workflow")])
def test_schedule_add_refuses_a_workflow_name_enqueue_would_refuse(
    dsn: str, db: psycopg.Connection, workflow: str, needle: str
) -> None:
    # Accepted, every tick would fail to enqueue it.
    done = console("schedule", "add", "nightly", "0 3 * * *", workflow, dsn=dsn)
    one_clear_line(done, 2, needle, "WORKFLOW")
    assert schedules(db) == 0


NOT_UTF8 = "x\udcff"  # the byte 0xff as Python keeps it from argv (surrogateescape)


@pytest.mark.parametrize(
    "args, env",
    [
        (["enqueue", NOT_UTF8], {}),
        (["enqueue", "w", "--queue", NOT_UTF8], {}),
        (["enqueue", "w", "--idempotency-key", NOT_UTF8], {}),
        (["cancel", "1", "--comment", NOT_UTF8], {}),
        (["list", "--workflow", NOT_UTF8], {}),
        (["sql", f"SELECT '{NOT_UTF8}'"], {}),
        (["send-event", NOT_UTF8], {}),
        (["cancel", "1"], {"KESTREL_OPERATOR": NOT_UTF8}),
    ],
    ids=["name", "queue", "idempotency-key", "comment", "list", "sql", "event", "operator-env"],
)
def test_an_argument_that_is_not_utf8_is_bad_usage(dsn: str, db: psycopg.Connection, args, env) -> None:
    # Was: a UnicodeEncodeError traceback from psycopg, after connecting.
    db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('w')")
    done = console(*args, dsn=dsn, env=env)
    message = one_clear_line(done, 2, "is not valid UTF-8", "x\\xff")
    assert message.startswith("error: ") and message.count("\n") == 1, message
    assert db.execute("SELECT count(*), min(status) FROM workflow_executions").fetchone() == (1, "enqueued")
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)


@pytest.mark.parametrize(
    "args, needles",
    [
        (["enqueue", "x", "--priority", "99999999999"], ["priority", "2147483647"]),
        (["enqueue", ""], ["workflow name", "non-empty"]),
        (["enqueue", "w" * 10_000], ["workflow name too long"]),
    ],
)
def test_bad_enqueue_arguments_are_named_before_the_database_is_asked(dsn: str, args, needles) -> None:
    # A schema that was never migrated: the bad argument is still what the user hears (exit 2),
    # not "the Kestrel schema does not exist" (exit 1).
    one_clear_line(console("--schema", "never_migrated_kt", *args, dsn=dsn), 2, *needles)


LONG_INTEGER = "1" * 4_301  # one digit past what Python converts to text


@pytest.mark.parametrize(
    "args",
    [
        ["enqueue", "x", "--input", LONG_INTEGER],
        ["enqueue", "x", "--input", f'{{"n": [{LONG_INTEGER}]}}'],
        ["send-event", "k", "--payload", LONG_INTEGER],
        ["schedule", "add", "s", "* * * * *", "x", "--input", LONG_INTEGER],
    ],
    ids=["enqueue", "enqueue-nested", "send-event", "schedule-add"],
)
def test_an_integer_python_will_not_read_is_one_line_not_a_traceback(dsn: str, db: psycopg.Connection, args) -> None:
    """Issue 44 (10): a traceback ('Exceeds the limit (4300 digits)') before."""
    done = console(*args, dsn=dsn)
    one_clear_line(done, 2, "integer of more than 4,300 digits")
    assert executions(db) == 0
    assert db.execute("SELECT count(*) FROM schedules").fetchone()[0] == 0


@pytest.mark.parametrize("target", ["../../etc/passwd", "/etc/passwd", "app:x y", "a.b:c-d", "-x", "a..b"])
def test_a_worker_target_that_is_no_module_name_is_bad_usage(dsn: str, target: str) -> None:
    """Issue 44 (10): `worker ../../etc/passwd` was a TypeError traceback from importlib."""
    done = console("worker", "--", target, dsn=dsn)
    one_clear_line(done, 2, "is not MODULE[:ATTR]")
