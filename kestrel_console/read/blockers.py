"""Why an execution is not moving, in one sentence: the facts in one statement, the sentence
from them (its version, its queue, its worker, its wait)."""

from __future__ import annotations

import shlex
from datetime import datetime
from functools import partial
from typing import Any

from kestrel_core.db import statements_beside
from kestrel_core.lifecycle import ExecutionStatus

from ..humanize import duration
from .session import DEFAULT_DEAD_AFTER_S, ReaderSession
from .workers import live_versions_text

SQL = statements_beside(__file__)

# The console's duration, as a sentence says it: whole seconds, never negative, '?' unknown.
in_words = partial(duration, subsecond=False, clamp=True, missing="?")


def _when(value: datetime | None) -> str:
    """'2024-05-01 12:00:03Z' for UTC, else with its offset."""
    if value is None:
        return "?"
    text = value.isoformat(sep=" ", timespec="seconds")
    offset = value.utcoffset()
    return text[: -len("+00:00")] + "Z" if offset is not None and not offset else text


def _requeue_hint(f: dict[str, Any], cli: bool) -> str:
    return f"(kestrel-console requeue {f['id']})" if cli else "(e)"


def _decide_hint(f: dict[str, Any], cli: bool) -> str:
    if cli:
        step = shlex.quote(str(f["wait_step"]))
        return f"approve or reject it (kestrel-console approve {f['id']} {step}, or reject)"
    return "approve (a) or reject (x)"


def describe_blocker(f: dict[str, Any], *, dead_after_s: float = DEFAULT_DEAD_AFTER_S, cli: bool = False) -> str | None:
    """The one sentence that says why an execution is not moving, from blocker_facts' row.

    What fixes it is named as the TUI's key (``(e)``), or with ``cli`` as the command to run
    (``kestrel-console requeue 42``): the CLI never prints a key it does not have."""
    status = f["status"]
    name = f["workflow_name"]
    no_worker = (
        f"no live worker has registered workflow {name!r}"
        + ("" if f["any_workers"] else " (no worker ever did)")
        + ": start one that runs it (kestrel-console worker MODULE)"
    )
    if status == ExecutionStatus.PAUSED:
        return paused_sentence(f, cli)
    if status == ExecutionStatus.ENQUEUED:
        if f["starts_in_s"] is not None and f["starts_in_s"] > 0:
            return f"it is scheduled for later: not before {_when(f['run_at'])} (in {in_words(f['starts_in_s'])})"
        if not f["live_workers"]:
            return no_worker
        queue_reason = describe_queue_blocker(f)
        if queue_reason:
            return queue_reason
        if f["live_slots"] and f["live_held"] >= f["live_slots"]:
            return (
                f"every slot of the {f['live_workers']} live worker(s) running {name!r} is busy "
                f"({f['live_held']}/{f['live_slots']}): it waits for a free one"
            )
        return None
    if status == ExecutionStatus.RUNNING:
        worker_id = f["owner_id"]
        expired = f["lease_expired_for_s"] is not None and f["lease_expired_for_s"] > 0
        if not f["owner_known"]:
            if expired:
                return (
                    f"its lease is held by {worker_id!r}, which is not a registered worker, and "
                    f"expired {in_words(f['lease_expired_for_s'])} ago: re-enqueue it {_requeue_hint(f, cli)}"
                )
            return None
        hb_age = f["owner_heartbeat_age_s"]
        if f["owner_stopped_at"] is not None or (hb_age is not None and hb_age > dead_after_s) or expired:
            lease = (
                f"its lease expired {in_words(f['lease_expired_for_s'])} ago"
                if expired
                else f"its lease runs until {_when(f['lease_expires'])}"
            )
            stopped = "stopped" if f["owner_stopped_at"] is not None else "whose heartbeat stopped"
            return (
                f"the lease is held by worker {worker_id!r} {stopped} {in_words(hb_age)} ago; "
                f"{lease}: a live worker's sweeper re-enqueues it, or re-enqueue it now {_requeue_hint(f, cli)}"
            )
        return None
    if status == ExecutionStatus.WAITING:
        kind = f["wait_kind"]
        if kind == "approval":
            deadline = f" (deadline {_when(f['wait_until'])})" if f["wait_until"] is not None else ""
            return (
                f"it waits for approval {f['wait_step']!r} since {_when(f['wait_since'])}"
                f"{deadline}: {_decide_hint(f, cli)}"
            )
        if kind == "sleep":
            if f["wait_until_in_s"] is not None and f["wait_until_in_s"] > 0:
                return (
                    f"it sleeps ({f['wait_step']!r}) until {_when(f['wait_until'])} "
                    f"(in {in_words(f['wait_until_in_s'])})"
                )
            if not f["live_workers"]:
                return no_worker
            return None
        if kind == "child":
            return f"it waits for its child execution(s) to finish ({f['wait_step']!r}, since {_when(f['wait_since'])})"
        if kind == "event":
            return (
                f"it waits for an event ({f['wait_step']!r}, since {_when(f['wait_since'])}): "
                "app.send_event(KEY, payload) wakes it"
            )
        if not f["live_workers"]:
            return no_worker
        return None
    return None


def paused_sentence(f: dict[str, Any], cli: bool) -> str:
    """Who holds a paused execution, why, how to let it go, and the wait that keeps its deadline."""
    why = f": {f['paused_comment']!r}" if f.get("paused_comment") else ""
    hint = f"kestrel-console resume {f['id']}" if cli else "u"
    text = (
        f"it is paused (by {f.get('paused_by') or '?'} at {_when(f.get('paused_at'))}{why}): "
        f"no worker runs it until it is resumed ({hint})"
    )
    if f.get("wait_kind"):
        until = f" until {_when(f['wait_until'])}" if f.get("wait_until") is not None else ""
        text += f"; its {f['wait_kind']} {f['wait_step']!r} stays open{until}"
    return text


def describe_queue_blocker(f: dict[str, Any]) -> str | None:
    """Why an enqueued execution with live workers for its workflow is not claimed: its
    version, its queue (paused, unserved, at a limit) or its concurrency key."""
    name, queue = f["workflow_name"], f.get("queue")
    have = sorted(v for v in (f.get("live_versions") or []) if v)
    if f.get("version") and f["version"] not in have:
        return (
            f"it needs version {f['version']} of {name!r}, live workers have "
            f"{live_versions_text(have)}: start a worker with that code "
            "(executions drain on the version they started under)"
        )
    if queue is None:
        return None
    if f.get("queue_paused"):
        return (
            f"its queue {queue!r} is paused (by {f['queue_paused_by'] or '?'} at "
            f"{_when(f['queue_paused_at'])}): resume it (kestrel-console queue resume {queue})"
        )
    if not f.get("queue_workers"):
        return (
            f"no live worker serves queue {queue!r} (workers started with --queues leave it out): "
            "start one that serves it"
        )
    limit, running = f.get("queue_concurrency"), f.get("queue_running") or 0
    if limit is not None and running >= limit:
        return (
            f"queue {queue!r} is at its concurrency limit ({running}/{limit} running across all "
            "workers): it waits for one to finish"
        )
    rate, used = f.get("queue_rate_limit"), f.get("queue_rate_used") or 0
    if rate is not None and used >= rate:
        return (
            f"queue {queue!r} reached its rate limit ({used} started in the last "
            f"{in_words(f['queue_rate_period_s'])}, limit {rate}): the next start is possible "
            f"in {in_words(f['queue_rate_frees_in_s'])}"
        )
    per_key = f.get("queue_per_key") or 1
    if f.get("concurrency_key") is not None and (f.get("key_running") or 0) >= per_key:
        return (
            f"{f['key_running']} execution(s) with concurrency key {f['concurrency_key']!r} already "
            f"run in queue {queue!r} (limit {per_key} per key): it waits for them to finish"
        )
    return None


class BlockerReads(ReaderSession):
    """The blocker sentence of one execution."""

    def blocker(self, execution_id: int, *, cli: bool = False) -> str | None:
        """Why this execution is not moving, in one sentence; None if it is moving or done.
        ``cli``: what fixes it is named as a command, not as a TUI key."""
        rows = self._rows("blocker", SQL.blocker_facts, {"id": execution_id, "dead_after": self.dead_after_s})
        if not rows:
            return None
        return describe_blocker(rows[0], dead_after_s=self.dead_after_s, cli=cli)
