"""Which operator actions a row's state allows, so a key is offered (and shown in the footer)
only where ``kestrel_core`` would accept it. The engine still decides: this only keeps keys
that can only be refused out of the way. The rules are the lifecycle's (kestrel_core.lifecycle:
each action's transition and its from-states), not spelled again here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kestrel_core.lifecycle import STATUSES, ExecutionStatus, transition

# The states ``cancel_execution`` accepts: the live ones.
CANCELLABLE = transition("cancel").from_states
# The states ``requeue_execution`` accepts without a condition; a running execution only once
# its lease expired (the transition's ``only_if``).
REQUEUEABLE = tuple(s for s in transition("requeue").from_states if s not in transition("requeue").only_if)
# The states ``pause_execution`` accepts (the live ones not paused yet); ``resume_execution``: paused.
PAUSABLE = transition("pause").from_states
RESUMABLE = transition("resume").from_states
# Writes that act on no row under the cursor (a filter's ids, an event key, a schedule by name):
# offered whatever the rows show.
ROWLESS = ("bulk", "send_event", "trigger")
# The states ``fork_execution`` refuses: a fork runs beside its origin only once that one stopped.
UNFORKABLE = tuple(s for s in STATUSES if not transition("fork").allows(s))


def allows(action: str, row: Mapping[str, Any] | None) -> bool:
    """True when ``action`` (requeue, cancel, pause, resume, approve, reject) can succeed on ``row``: an
    execution (``status``, ``lease_expired``) or a gate (``pending_gate``)."""
    if row is None:
        return False
    status = row.get("status")
    if action == "cancel":
        return status in CANCELLABLE
    if action == "requeue":
        return status in REQUEUEABLE or (status == ExecutionStatus.RUNNING and bool(row.get("lease_expired")))
    if action in ("approve", "reject"):
        return bool(row.get("pending_gate"))
    if action == "pause":
        return status in PAUSABLE
    if action == "resume":
        return status in RESUMABLE
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
        if row.get("status") == ExecutionStatus.RUNNING:
            return f"{what} and its lease is live: it can be re-enqueued once the lease expires"
        return f"{what}: only errored or cancelled executions (or expired leases) can be re-enqueued"
    return f"execution {row.get('id', '?')} has no approval gate waiting for a decision"
