"""The writes only the schema's owner makes (its audited functions, the engine's SECURITY
DEFINER code): each trigger of guard_owner_writes refuses a worker login with its rule's own
message and hint, and lets the owner through. The message is checked word for word: a column
privilege refuses with the same SQLSTATE (42501), so only the text shows the trigger did it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import pytest

from tests.core.test_roles import Logins, as_user, logins  # noqa: F401 (fixture)

FINISHED_HINT = (
    "Cancel and requeue through the audited operator functions: kestrel-console cancel / requeue,"
    " as a login granted the operator role."
)
PAUSED_HINT = (
    "Pause and resume through the audited operator functions: kestrel-console pause / resume,"
    " as a login granted the operator role."
)


def _execution(status: str) -> Callable[[psycopg.Connection], int]:
    def make(db: psycopg.Connection) -> int:
        row = db.execute(
            "INSERT INTO workflow_executions (workflow_name, status) VALUES ('w', %s) RETURNING id", (status,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    return make


def _closed_attempt(db: psycopg.Connection) -> int:
    eid = _execution("running")(db)
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, outcome, finished_at)"
        " VALUES (%s, 's', 1, 'success', now())",
        (eid,),
    )
    return eid


@dataclass(frozen=True)
class Rule:
    """A write a rule refuses: what to set up (returns an execution id), the statement (with
    ``{id}``), the message it gets (with ``{id}`` and ``{user}``) and its hint."""

    setup: Callable[[psycopg.Connection], int]
    statement: str
    message: str
    hint: str


RULES = {
    "insert": Rule(
        lambda db: 0,
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('w', 'paused')",
        "permission denied to insert an execution that is paused (or claimed, started, finished or with a"
        " deadline) as role {user}",
        "A new execution is enqueued (Kestrel.enqueue) and the engine moves it on from there.",
    ),
    "cancel": Rule(
        _execution("enqueued"),
        "UPDATE workflow_executions SET status = 'cancelled', finished_at = now() WHERE id = {id}",
        "permission denied to cancel execution {id} (it is enqueued) with a plain UPDATE as role {user}",
        FINISHED_HINT,
    ),
    "finished": Rule(
        _execution("success"),
        "UPDATE workflow_executions SET status = 'enqueued' WHERE id = {id}",
        "permission denied to change the finished execution {id} (it is success) with a plain UPDATE as role {user}",
        FINISHED_HINT,
    ),
    "pause": Rule(
        _execution("enqueued"),
        "UPDATE workflow_executions SET status = 'paused' WHERE id = {id}",
        "permission denied to move execution {id} from enqueued to paused with a plain UPDATE as role {user}",
        PAUSED_HINT,
    ),
    "resume": Rule(
        _execution("paused"),
        "UPDATE workflow_executions SET status = 'enqueued' WHERE id = {id}",
        "permission denied to move execution {id} from paused to enqueued with a plain UPDATE as role {user}",
        PAUSED_HINT,
    ),
    "paused row": Rule(
        _execution("paused"),
        "UPDATE workflow_executions SET run_at = run_at + interval '999 days' WHERE id = {id}",
        "permission denied to change paused execution {id} with a plain UPDATE as role {user}",
        "A paused execution changes only through the audited operator functions (resume, cancel, fork).",
    ),
    "closed attempt": Rule(
        _closed_attempt,
        "UPDATE step_attempts SET outcome = 'error' WHERE execution_id = {id}",
        'permission denied to rewrite attempt 1 of step "s" of execution {id} (it is success) as role {user}',
        "An attempt is closed once, by the worker that ran it or the transition that ended its claim;"
        " a closed attempt is history.",
    ),
}
STATE = """
SELECT (SELECT array_agg(to_jsonb(e) ORDER BY id) FROM workflow_executions e),
       (SELECT array_agg(to_jsonb(a) ORDER BY id) FROM step_attempts a)
"""


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_a_worker_login_is_refused_with_the_rules_message_and_the_owner_passes(
    rule: Rule, logins: Logins, db: psycopg.Connection
) -> None:
    eid = rule.setup(db)
    statement = rule.statement.format(id=eid)
    before = db.execute(STATE).fetchone()
    with as_user(logins.worker_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
        conn.execute(statement)
    assert refused.value.diag.message_primary == rule.message.format(id=eid, user=logins.worker_user)
    assert refused.value.diag.message_hint == rule.hint
    assert db.execute(STATE).fetchone() == before
    assert db.execute(statement).rowcount == 1
    assert db.execute(STATE).fetchone() != before
