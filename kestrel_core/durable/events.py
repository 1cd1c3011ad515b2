"""Events: durable machine signals (``app.send_event``) that workflows wait for.

Events are rows of ``workflow_events``, never consumed: every execution waiting on a key gets
the event. ``ctx.wait_for_event(key)`` returns the first event with that key sent since the
execution was enqueued and after any event with that key it already received: an event sent
before the workflow reaches the wait is not lost.

Parking and sending take the same per-key advisory lock before their statement, so one of the
two always sees the other's committed row: a wait parks only if no event is there yet, and a
send wakes every wait parked before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.base.describe import unstorable
from kestrel_core.base.errors import InvalidArgument
from kestrel_core.base.serialization import to_json
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import one_row, render
from kestrel_core.dispatch.keys import check_name
from kestrel_core.durable.checkpoint import Fence

SQL = statements_beside(__file__)


@dataclass(frozen=True)
class Event:
    """What ``ctx.wait_for_event`` returns: the event, or ``timed_out=True`` (payload None)."""

    key: str
    payload: Any
    timed_out: bool
    event_id: int | None = None
    sent_at: str | None = None
    sent_by: str | None = None

    @classmethod
    def from_checkpoint(cls, key: str, output: dict[str, Any]) -> Event:
        return cls(
            key=output.get("key") or key,
            payload=output.get("payload"),
            timed_out=bool(output.get("timed_out")),
            event_id=output.get("event_id"),
            sent_at=output.get("sent_at"),
            sent_by=output.get("sent_by"),
        )


def receive_or_park(
    conn: psycopg.Connection, schema: str, at: Fence, *, key: str, after_id: int, after: timedelta | None
) -> tuple[bool, Any]:
    """(claim still ours, the received event's checkpoint or None when parked)."""
    with conn.transaction():
        conn.execute(SQL.key_lock, {"key": key})
        row = conn.execute(
            render(SQL.receive_or_park, schema), at.params(key=key, after_id=after_id, after=after)
        ).fetchone()
    row = one_row(row, "receive_or_park")
    return bool(row[0]), row[1]


def check_key(key: object) -> str:
    """``key`` if it can name an event (sent or waited for), else ValueError."""
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"an event key must be a non-empty string, got {key!r}")
    if (why := unstorable(key)) is not None:
        raise InvalidArgument(f"an event key cannot contain {why}, got {key!r}")
    return key


def check_send(key: object, payload: Any) -> Jsonb:
    """The payload of an event to send under ``key``, checked (ValueError, NotSerializable)."""
    check_name(check_key(key), "an event key")  # indexed: bounded like a queue name
    return to_json(payload, f"the payload of event {key!r}")
