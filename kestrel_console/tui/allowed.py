"""Which operator actions a row's state allows, so a key is offered (and shown in the footer)
only where ``kestrel_core`` would accept it. The engine still decides: this only keeps keys
that can only be refused out of the way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kestrel_core import LIVE_STATUSES

# The states ``cancel_execution`` accepts (db/schema/functions/cancel_execution.sql): the live ones.
CANCELLABLE = LIVE_STATUSES
# The states ``requeue_execution`` accepts; a running execution only once its lease expired.
REQUEUEABLE = ("error", "cancelled")
# The states ``pause_execution`` accepts (the live ones not paused yet); ``resume_execution``: paused.
PAUSABLE = tuple(s for s in LIVE_STATUSES if s != "paused")
# Writes that act on no row under the cursor (a filter's ids, an event key, a schedule by name):
# offered whatever the rows show.
ROWLESS = ("bulk", "send_event", "trigger")
# The states ``fork_execution`` refuses: a fork runs beside its origin only once that one stopped.
UNFORKABLE = ("enqueued", "running")


def allows(action: str, row: Mapping[str, Any] | None) -> bool:
    """True when ``action`` (requeue, cancel, pause, resume, approve, reject) can succeed on ``row``: an
    execution (``status``, ``lease_expired``) or a gate (``pending_gate``)."""
    if row is None:
        return False
    status = row.get("status")
    if action == "cancel":
        return status in CANCELLABLE
    if action == "requeue":
        return status in REQUEUEABLE or (status == "running" and bool(row.get("lease_expired")))
    if action in ("approve", "reject"):
        return bool(row.get("pending_gate"))
    if action == "pause":
        return status in PAUSABLE
    if action == "resume":
        return status == "paused"
    if action == "fork":
        return status not in UNFORKABLE
    return True


def why_not(action: str, row: Mapping[str, Any] | None) -> str:
    """One line saying why ``action`` is not offered on ``row``."""
    if row is None:
        return "nothing selected"
    what = f"execution {row.get('id', '?')} is {row.get('status', '?')}"
    if action == "cancel":
        return f"{what}: only enqueued, running, waiting or paused executions can be cancelled"
    if action == "pause":
        return f"{what}: only enqueued, running or waiting executions can be paused"
    if action == "resume":
        return f"{what}: only a paused execution can be resumed"
    if action == "fork":
        return f"{what}: only a finished, waiting or paused execution can be forked (cancel it, or wait until it stops)"
    if action == "requeue":
        if row.get("status") == "running":
            return f"{what} and its lease is live: it can be re-enqueued once the lease expires"
        return f"{what}: only errored or cancelled executions (or expired leases) can be re-enqueued"
    return f"execution {row.get('id', '?')} has no approval gate waiting for a decision"
