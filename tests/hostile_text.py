"""Rows whose text holds terminal control sequences, as a hostile enqueuer could write them."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

# Clear screen + red, a window-title OSC ended by BEL, a carriage return that would overwrite
# the line, a C1 CSI, and a right-to-left override.
ESC_NAME = "pay\x1b[2J\x1b[31mroll"
ESC_INPUT = {"note": "\x1b]0;pwned\x07hi\rX", "c1": "\x9b31m", "bidi": "abc\u202edef"}
ESC_STEP = "rca\x1b[1A"
ESC_ERROR = "boom\x1b[8m hidden"
ESC_COMMENT = "ok\x1b[5m"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def hostile_execution(db: psycopg.Connection) -> int:
    """An errored execution: hostile name, input, error, step id, and a decided gate whose
    decider and comment are hostile too."""
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, input, error, started_at, finished_at) "
        "VALUES (%s, 'error', %s, %s, now() - interval '3 s', now()) RETURNING id",
        (ESC_NAME, Jsonb(ESC_INPUT), ESC_ERROR),
    ).fetchone()[0]
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, started_at, finished_at, "
        "outcome, error) VALUES (%s, %s, 1, %s, now() - interval '2 s', now() - interval '1 s', "
        "'error', %s)",
        (eid, ESC_STEP, "w\x1b[0m1", ESC_ERROR),
    )
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, resolved_at, decision, "
        "decided_by, comment, decided_at) VALUES (%s, %s, 'approval', now() - interval '3 s', "
        "now() - interval '2 s', 'approved', %s, %s, now() - interval '2 s')",
        (eid, "gate\x07", "eve\x1b[31m", ESC_COMMENT),
    )
    return eid


def has_raw_control(text: str) -> bool:
    return any(ch in text for ch in RAW)


ESC_QUEUE = "mail\x1b[31m"
ESC_SCHEDULE = "nightly\x1b]0;t\x07"
ESC_OPERATOR = "mallory\x1b[32m"


def hostile_paused_things(db: psycopg.Connection) -> None:
    """A paused queue holding an enqueued execution and a paused schedule, with hostile names,
    pausers, workflow and cron text; and an execution that finished 60 days ago (for prune)."""
    db.execute(
        "INSERT INTO queues (name, paused, paused_by, paused_at) VALUES (%s, true, %s, now())",
        (ESC_QUEUE, ESC_OPERATOR),
    )
    db.execute("INSERT INTO workflow_executions (workflow_name, queue) VALUES (%s, %s)", (ESC_NAME, ESC_QUEUE))
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source, paused, paused_by) "
        "VALUES (%s, %s, %s, now(), 'cli', true, %s)",
        (ESC_SCHEDULE, "0 3 * * *\x1b[1m", ESC_NAME, ESC_OPERATOR),
    )
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, finished_at) "
        "VALUES (%s, 'success', now() - interval '60 days')",
        (ESC_NAME,),
    )


# A password and DSNs that hold it malformed, each the way a parser would quote back.
SECRET = "Sx9zq"
MALFORMED_DSNS = (
    f"postgresql://bob:{SECRET}%zz@127.0.0.1:5432/app",  # bad percent-escape
    f"postgresql://bob:{SECRET} {SECRET}@127.0.0.1:5432/app",  # a space
    f"postgresql://bob:{SECRET}@{SECRET}@127.0.0.1:5432/app",  # an '@'
    f"host=127.0.0.1 port=5432 password='{SECRET} user=bob",  # unterminated quote
    f"host=127.0.0.1 port=5432 password=x {SECRET} user=bob",  # an unquoted space
    f"postgresql://bob@127.0.0.1:5432/app?password={SECRET}%zz",  # query form
)
# The same password holding a byte that is not UTF-8 (\xff, as a Latin-1 terminal sends it;
# Python keeps it as the lone surrogate \udcff, and passes it on to a child process as \xff).
NOT_UTF8_DSNS = (
    f"postgresql://u:{SECRET}\udcffpw@127.0.0.1:1/x",
    f"host=127.0.0.1 port=1 user=u password={SECRET}\udcffpw",
)


# Text that Rich or Textual would read as markup or emoji codes if handed over as a str:
# Kestrel's own child-wait step id, a workflow name, an approval comment with markup, an emoji
# code and a link; wide characters; and a control character (shown as its escape).
MARKUP_STEP = "wait-all:child:resize+2"
MARKUP_NAME = "mk:child:wf"
MARKUP_COMMENT = "[bold]lgtm[/bold] :fire: [link=http://x]y"
MARKUP_WIDE = "名前:fire:[i]x"
MARKUP_CONTROL = "tab[red]\x1b[31mz"
MARKUP_CONTROL_SHOWN = "tab[red]\\x1b[31mz"
MARKUP_QUEUE = "q:fire:[b]1[/b]"
MARKUP_WORKER = "[red]w1[/red]"
MARKUP_SCHEDULE = "[blink]nightly:fire:"
MARKUP_GATE = "gate:rocket:[u]"


def markup_world(db: psycopg.Connection) -> dict[str, int]:
    """Rows holding MARKUP_* text where every screen shows it: a waiting execution with a
    pending gate (details, comment), a decided gate, a child-wait step, an errored execution,
    a stuck lease, a live worker, a paused queue and a paused schedule. Returns the ids."""
    ids: dict[str, int] = {}
    ids["waiting"] = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, input, started_at, owner_id, queue) "
        "VALUES (%s, 'waiting', %s, now() - interval '9 s', %s, %s) RETURNING id",
        (MARKUP_NAME, Jsonb({"note": MARKUP_COMMENT, "wide": MARKUP_WIDE}), MARKUP_WORKER, MARKUP_QUEUE),
    ).fetchone()[0]
    eid = ids["waiting"]
    db.execute(
        "INSERT INTO step_attempts (execution_id, step_id, attempt, owner_id, started_at, finished_at, "
        "outcome) VALUES (%s, %s, 1, %s, now() - interval '8 s', now() - interval '7 s', 'success')",
        (eid, MARKUP_STEP, MARKUP_WORKER),
    )
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, resolved_at, decision, "
        "decided_by, comment, decided_at) VALUES (%s, %s, 'approval', now() - interval '7 s', "
        "now() - interval '6 s', 'approved', %s, %s, now() - interval '6 s')",
        (eid, "first-gate", "alice", MARKUP_COMMENT),
    )
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, details) "
        "VALUES (%s, %s, 'approval', now() - interval '5 s', %s)",
        (eid, MARKUP_GATE, Jsonb({"risk": MARKUP_COMMENT})),
    )
    ids["error"] = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, error, started_at, finished_at) "
        "VALUES (%s, 'error', %s, now() - interval '3 s', now()) RETURNING id",
        (MARKUP_WIDE, MARKUP_CONTROL),
    ).fetchone()[0]
    ids["stuck"] = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, started_at, owner_id, lease_expires) "
        "VALUES (%s, 'running', now() - interval '90 s', %s, now() - interval '60 s') RETURNING id",
        (MARKUP_NAME, MARKUP_WORKER),
    ).fetchone()[0]
    db.execute(
        "INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, started_at, "
        "last_heartbeat) VALUES (%s, %s, 1, %s, 4, now() - interval '1 min', now())",
        (MARKUP_WORKER, MARKUP_WIDE, [MARKUP_NAME]),
    )
    db.execute(
        "INSERT INTO queues (name, paused, paused_by, paused_at, workflows) VALUES (%s, true, %s, now(), %s)",
        (MARKUP_QUEUE, MARKUP_WORKER, [MARKUP_NAME]),
    )
    db.execute(
        "INSERT INTO schedules (name, cron, workflow_name, next_tick, source, paused, paused_by) "
        "VALUES (%s, '0 3 * * *', %s, now(), 'cli', true, %s)",
        (MARKUP_SCHEDULE, MARKUP_NAME, MARKUP_WORKER),
    )
    return ids
