"""Schedules as rows: declared in code (``@app.schedule``, upserted by every worker at start)
or added by an operator (``kestrel-console schedule add``), paused, resumed and removed through
the audited SECURITY DEFINER functions of migration 0007.

What a scheduled run receives as input: the schedule's ``input`` object (if any) plus
``schedule`` (its name) and ``scheduled_at`` (the tick, ISO 8601 in UTC). Ticks are advanced by
``kestrel_core.engine.scheduler``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.admin import cron
from kestrel_core.base.errors import ActionRefused, InvalidArgument
from kestrel_core.base.serialization import to_json
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import one_row, render
from kestrel_core.dispatch.enqueue import check_workflow_name

SQL = statements_beside(__file__)

# Keys every scheduled run's input carries; a schedule's own input may not use them.
RESERVED_KEYS = ("schedule", "scheduled_at")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")


log = logging.getLogger("kestrel.schedules")


@dataclass(frozen=True)
class Schedule:
    """A schedule declared in code: enqueue ``workflow`` at every tick of ``cron`` in ``timezone``."""

    name: str
    cron: str
    workflow: str
    timezone: str = "UTC"
    catch_up: bool = False
    input: dict[str, Any] | None = None


def check(name: str, expression: str, workflow: str, timezone: str, input: Any) -> tuple[str, Jsonb | None]:
    """Validate a schedule's parts; returns (normalised cron, input as jsonb). ValueError
    says what is wrong and how to write it."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(
            f"invalid schedule name {name!r}: use letters, digits, '_', '.', ':' or '-' "
            "(starting with a letter or digit, at most 100 characters)"
        )
    if not isinstance(workflow, str) or not workflow.strip():
        raise InvalidArgument("give the name of the workflow the schedule enqueues")
    check_workflow_name(workflow)  # every tick enqueues it: refuse now what enqueue would refuse then
    expression = cron.check_cron(expression)
    cron.check_timezone(timezone)
    if input is not None and not isinstance(input, dict):
        raise InvalidArgument(
            f"the input of schedule {name!r} must be a JSON object (its keys are passed "
            f"to every run beside 'scheduled_at'), not {type(input).__name__}"
        )
    clash = [k for k in RESERVED_KEYS if input and k in input]
    if clash:
        raise InvalidArgument(
            f"the input of schedule {name!r} may not use the key(s) {', '.join(clash)}: "
            "every scheduled run gets them from the schedule"
        )
    return expression, (to_json(input, f"the input of schedule {name!r}") if input is not None else None)


def run_input(name: str, tick: datetime, input: dict[str, Any] | None) -> dict[str, Any]:
    """The input of the run a tick enqueues."""
    return {**(input or {}), "schedule": name, "scheduled_at": tick.astimezone(UTC).isoformat()}


def db_now(conn: psycopg.Connection) -> datetime:
    """The database's clock: every worker agrees on it, whatever their own clocks say."""
    row = conn.execute(SQL.now).fetchone()
    row = one_row(row, "NOW")
    now: datetime = row[0]
    return now


def declare(conn: psycopg.Connection, schema: str, schedules: Sequence[Schedule], by: str) -> list[str]:
    """Upsert the schedules declared in code; returns the names left alone because an operator
    added a schedule of that name (the operator's row wins; a warning is logged)."""
    if not schedules:
        return []
    now = db_now(conn)
    with conn.transaction():
        for s in schedules:
            expression, input_json = check(s.name, s.cron, s.workflow, s.timezone, s.input)
            conn.execute(
                render(SQL.declare, schema),
                {
                    "name": s.name,
                    "cron": expression,
                    "timezone": s.timezone,
                    "workflow": s.workflow,
                    "input": input_json,
                    "catch_up": s.catch_up,
                    "by": by,
                    "next_tick": cron.next_after(expression, s.timezone, now),
                },
            )
        kept = [r[0] for r in conn.execute(render(SQL.operator_owned, schema), ([s.name for s in schedules],))]
    for name in kept:
        log.warning(
            "event=schedule_not_declared schedule=%s (an operator added a schedule of that "
            "name: it wins; remove it to let the code's declaration take over)",
            name,
        )
    return kept


def resumed_tick(name: str, expression: str, timezone: str, now: datetime) -> datetime:
    """The first tick after ``now`` of a schedule resuming (the ticks missed while paused are
    not enqueued); ActionRefused if its row was edited by hand into nonsense."""
    try:
        return cron.next_after(cron.check_cron(expression), timezone, now)
    except (ValueError, KeyError) as exc:
        raise ActionRefused(
            f"schedule {name!r} cannot resume: {exc}; remove it and add it again with a valid expression"
        ) from None
