"""Operator actions from the TUI: every write goes through ``kestrel_core.Kestrel`` (which
checks the state, writes the audit row and refuses what the state does not allow).

Called from worker threads only: the first call opens the connection pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from rich.text import Text

from kestrel_core import Kestrel, KestrelError, first_line
from kestrel_core.admin import Preview, Progress, bulk_apply, bulk_freeze, bulk_reasons
from kestrel_core.db import statements_beside

from ..formatting import when
from ..settings import Settings

SQL = statements_beside(__file__)

ACTIONS = ("approve", "reject", "requeue", "cancel", "pause", "resume")
# The other writes a key starts, each with its own prompts (not ``Operator.run``): hidden and
# refused in --read-only mode as the actions are; each key means nothing else on any screen.
WRITES = ("fork", "bulk", "send_event", "trigger")
# How an action is said in a confirmation and in the result.
VERBS = {
    "approve": ("Approve", "approved"),
    "reject": ("Reject", "rejected"),
    "requeue": ("Re-enqueue", "re-enqueued"),
    "cancel": ("Cancel", "cancelled"),
    "pause": ("Pause", "paused"),
    "resume": ("Resume", "resumed"),
    "fork": ("Fork", "forked"),
    "bulk": ("Bulk action", "acted on"),
    "send_event": ("Send event", "sent"),
    "trigger": ("Trigger schedule", "triggered"),
}


NO_INPUT: Any = object()  # a fork keeps its origin's input


class ReadOnlyRefused(KestrelError):
    """The console runs with --read-only: no action is allowed."""


@dataclass(frozen=True)
class Target:
    """One thing an action applies to: an execution, or one approval gate of it."""

    execution_id: int
    workflow: str = ""
    status: str = ""
    step_id: str | None = None

    def describe(self) -> str:
        what = f"execution {self.execution_id}"
        if self.workflow:
            what += f" ({self.workflow})"
        if self.step_id:
            return f"gate {self.step_id!r} of {what}"
        return f"{what}, now {self.status}" if self.status else what


# At most this many executions acted on are read back from the primary to confirm the action.
CONFIRMED_MAX = 50


@dataclass
class ActionOutcome:
    """What an operator action did to the targets it was given: done, refused (and why), and
    what the primary says now."""

    action: str
    done: list[Target] = field(default_factory=list)
    refused: list[tuple[Target, str]] = field(default_factory=list)
    # Read back from the primary after the action: execution id -> its status there now, and
    # the primary's WAL position then (None: not read, or the console has no read replica).
    confirmed: dict[int, str] = field(default_factory=dict)
    primary_lsn: str | None = None

    def summary(self) -> str:
        past = VERBS[self.action][1]
        parts = []
        if self.done:
            parts.append(
                f"{past} {_plural(len(self.done), 'approval gate' if self.done[0].step_id else 'execution')}: "
                + ", ".join(str(t.execution_id) for t in self.done)
            )
        if self.confirmed:
            parts.append(
                "on the primary now: " + ", ".join(f"{eid} {status}" for eid, status in self.confirmed.items())
            )
        for target, reason in self.refused:
            parts.append(f"{target.execution_id}: {reason}")
        return "\n".join(parts) or "nothing to do"


def behind_replica(awaiting: tuple[str, int] | None) -> Text:
    """The mark of a row acted on whose change the read replica has not replayed yet: what the
    primary said (``awaiting``: its status there, and the WAL position to wait for)."""
    if awaiting is None:
        return Text("")
    return Text(f" → {awaiting[0]} on the primary (replica behind)", style="italic yellow")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def confirmation(action: str, targets: list[Target], operator: str, comment: str | None = None) -> str:
    """The question a confirmation asks: what changes, on what, as whom."""
    verb = VERBS[action][0]
    noun = "approval gate" if action in ("approve", "reject") else "execution"
    if len(targets) == 1:
        head = f"{verb} {targets[0].describe()}?"
    else:
        listed = "\n".join(f"  • {t.describe()}" for t in targets[:8])
        more = f"\n  … and {len(targets) - 8} more" if len(targets) > 8 else ""
        head = f"{verb} {_plural(len(targets), noun)}?\n{listed}{more}"
    effect = {
        "approve": "The gate is decided as approved and the execution resumes.",
        "reject": "The gate is decided as rejected and the execution resumes with that decision.",
        "requeue": "The execution is enqueued again; successful steps are replayed from their checkpoints.",
        "cancel": "The execution ends as cancelled; a running worker stops at its next step boundary.",
        "pause": "No worker runs it until it is resumed; a running worker stops at its next step boundary "
        "(the step it is in runs again after the resume); its sleeps and gates keep their deadlines.",
        "resume": "It goes on from its checkpoints (or waits again while a sleep or gate is still open).",
    }[action]
    said = f" Comment: {comment!r}." if comment else ""
    return f"{head}\n{effect} Recorded as {operator!r}.{said}"


class Operator:
    """Runs approve/reject/re-enqueue/cancel/pause/resume under the console's --operator name."""

    def __init__(self, config: Settings) -> None:
        self.config = config
        self._kestrel: Kestrel | None = None
        self._lock = threading.Lock()

    def _app(self) -> Kestrel:
        if self.config.read_only:
            raise ReadOnlyRefused("the console runs with --read-only: actions are disabled")
        with self._lock:
            if self._kestrel is None:
                self._kestrel = Kestrel(self.config.dsn, schema=self.config.schema, application_name="kestrel-console")
            return self._kestrel

    def run(self, action: str, targets: Iterable[Target], comment: str | None = None) -> ActionOutcome:
        """Apply ``action`` to each target; refusals are collected, not raised (except
        read-only and an unreachable database, which stop the batch)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        app = self._app()
        by = self.config.operator
        calls: dict[str, Callable[[Target], Any]] = {
            "approve": lambda t: app.approve(t.execution_id, t.step_id or "", by=by, comment=comment),
            "reject": lambda t: app.reject(t.execution_id, t.step_id or "", by=by, comment=comment),
            "requeue": lambda t: app.requeue(t.execution_id, by=by, comment=comment),
            "cancel": lambda t: app.cancel(t.execution_id, by=by, comment=comment),
            "pause": lambda t: app.pause(t.execution_id, by=by, comment=comment),
            "resume": lambda t: app.resume(t.execution_id, by=by, comment=comment),
        }
        from kestrel_core import ActionRefused, NotFound

        outcome = ActionOutcome(action)
        for target in targets:
            try:
                calls[action](target)
            except (ActionRefused, NotFound) as exc:
                outcome.refused.append((target, first_line(exc)))
            else:
                outcome.done.append(target)
        if self.config.read_dsn and outcome.done:
            self._confirm(app, outcome)
        return outcome

    def _confirm(self, app: Kestrel, outcome: ActionOutcome) -> None:
        """With a read replica, the screens lag the primary: read each execution acted on back
        from the primary (its status there is what the result says), and the primary's WAL
        position, which the replica must replay before its screens show the change. A failure
        here changes nothing: the action is done; the result just says less."""
        from kestrel_core import NotFound

        try:
            for target in outcome.done[:CONFIRMED_MAX]:
                try:
                    outcome.confirmed[target.execution_id] = app.get(target.execution_id).status
                except NotFound:
                    outcome.confirmed[target.execution_id] = "gone"
            with app.connection() as conn:
                row = conn.execute(SQL.primary_lsn).fetchone()
            outcome.primary_lsn = row[0] if row else None
        except (KestrelError, psycopg.Error):
            pass

    def set_paused(self, kind: str, name: str, paused: bool) -> str:
        """Pause or resume a queue or a schedule as the console's operator (audited); returns
        what was done. Raises NotFound / ActionRefused when its state does not allow it."""
        app, by = self._app(), self.config.operator
        if kind == "queue":
            if paused:
                app.pause_queue(name, by=by)
                return f"paused queue {name!r}: nothing more is claimed from it"
            app.resume_queue(name, by=by)
            return f"resumed queue {name!r}"
        if kind == "schedule":
            if paused:
                app.pause_schedule(name, by=by)
                return f"paused schedule {name!r}"
            return f"resumed schedule {name!r}; next tick {when(app.resume_schedule(name, by=by))}"
        raise ValueError(f"nothing of kind {kind!r} can be paused")

    def fork(self, execution_id: int, from_step: str, *, input: Any = NO_INPUT, comment: str | None = None) -> int:
        """Fork ``execution_id`` from ``from_step`` (the origin's input unless ``input`` is
        given); returns the new id. Raises NotFound / ActionRefused with the engine's reason."""
        options = {} if input is NO_INPUT else {"input": input}
        return self._app().fork(execution_id, from_step=from_step, by=self.config.operator, comment=comment, **options)

    def send_event(self, key: str, payload: Any) -> int:
        """Send event ``key`` with ``payload`` (audited); returns the event's id."""
        return self._app().send_event(key, payload, by=self.config.operator)

    def trigger_schedule(self, name: str, comment: str | None = None) -> int:
        """Run schedule ``name`` once, now (audited); returns the new execution's id."""
        return self._app().trigger_schedule(name, by=self.config.operator, comment=comment)

    def bulk_freeze(self, action: str, ids: list[int], filter_text: str) -> Preview:
        """Freeze ``ids`` for ``action`` under a new token (kestrel_core's bulk preview)."""
        app = self._app()
        with app.connection() as conn:
            return bulk_freeze(conn, app.schema, action, ids, by=self.config.operator, filter_text=filter_text)

    def bulk_apply(
        self, token: str, action: str, comment: str | None, progress: Callable[[Progress], None]
    ) -> tuple[Progress, list[dict[str, Any]]]:
        """Act on exactly the ids frozen under ``token``; returns the result and the refusals
        grouped by reason."""
        app = self._app()
        with app.connection() as conn:
            done = bulk_apply(
                conn, app.schema, token, action=action, by=self.config.operator, comment=comment, progress=progress
            )
            return done, bulk_reasons(conn, app.schema, done.batch_id)

    def close(self) -> None:
        with self._lock:
            if self._kestrel is not None:
                self._kestrel.close()
                self._kestrel = None
