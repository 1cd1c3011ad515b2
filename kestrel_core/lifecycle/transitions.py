"""Every transition of an execution's status, named once: where it may start, where it goes,
who makes it, the statement or schema function that performs it, and how it closes an attempt
its worker left open.

The table is the rule book the console reads (which keys an operator is offered) and the
source of the lifecycle diagram in docs/how-it-works.md (``diagram()``); tests/core/
test_lifecycle.py checks each ``performed_by`` names a statement or function file that exists,
and that the SQL of each transition that closes attempts does close them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from kestrel_core.lifecycle.states import LIVE, AttemptOutcome, ExecutionStatus

S = ExecutionStatus


class Actor(StrEnum):
    """Who makes a transition."""

    CLIENT = "client"  # the application (Kestrel.enqueue, send_event, a schedule's tick)
    WORKER = "worker"  # the worker holding the claim, at a step boundary
    OPERATOR = "operator"  # a person, through an audited function (the console, the API)
    SWEEPER = "sweeper"  # a worker's periodic sweeps (leases, waits, deadlines)


@dataclass(frozen=True)
class Transition:
    """One named move of an execution's status.

    ``performed_by`` names where the SQL lives: ``"<function>.sql"`` (a file of
    kestrel_core/db/schema/functions), ``"kestrel_core.<module>:<CONSTANT>"`` or
    ``"kestrel_core.<module>:SQL.<name>"`` (a block of the module's statements file). ``only_if``
    says what a from-state needs besides the status (a running execution is requeued only once
    its lease lapsed). ``closes_attempts``: the outcome the transition gives, in the same
    transaction, to an attempt still open (``running``) that its worker can no longer close.
    ``new_execution``: the transition creates an execution (in ``to``) and leaves its origin
    as it is.
    """

    name: str
    from_states: tuple[ExecutionStatus, ...]
    to: tuple[ExecutionStatus, ...]
    by: tuple[Actor, ...]
    performed_by: tuple[str, ...]
    closes_attempts: AttemptOutcome | None = None
    only_if: Mapping[ExecutionStatus, str] = field(default_factory=dict)
    new_execution: bool = False

    def allows(self, status: object) -> bool:
        """Whether an execution in ``status`` may take this transition (``only_if`` aside)."""
        return status in self.from_states


_LIVE = tuple(s for s in S if s in LIVE)

TRANSITIONS: tuple[Transition, ...] = (
    Transition(
        "enqueue",
        (),
        (S.ENQUEUED,),
        (Actor.CLIENT, Actor.WORKER),
        ("kestrel_core.dispatch.enqueue:ENQUEUE", "kestrel_core.durable.children:START_CHILD", "trigger_schedule.sql"),
        new_execution=True,
    ),
    Transition(
        "claim",
        (S.ENQUEUED,),
        (S.RUNNING,),
        (Actor.WORKER,),
        (
            "kestrel_core.dispatch.claim:CLAIM",
            "kestrel_core.dispatch.claim:CLAIM_BEHIND",
            "kestrel_core.dispatch.claim:CLAIM_BEHIND_SLICE",
            "kestrel_core.dispatch.limited_claim:SQL.claim_limited",
        ),
    ),
    Transition(
        "park",
        (S.RUNNING,),
        (S.WAITING,),
        (Actor.WORKER,),
        (
            "kestrel_core.durable.waits:SQL.park",
            "kestrel_core.durable.children:SQL.park_on_children",
            "kestrel_core.durable.events:SQL.receive_or_park",
        ),
    ),
    Transition(
        "wake",
        (S.WAITING,),
        (S.ENQUEUED,),
        (Actor.SWEEPER, Actor.OPERATOR, Actor.CLIENT),
        ("sweep_waits.sql", "decide_approval.sql", "send_event.sql", "execution_finished.sql"),
    ),
    Transition("complete", (S.RUNNING,), (S.SUCCESS,), (Actor.WORKER,), ("kestrel_core.durable.boundary:WRITE",)),
    Transition("fail", (S.RUNNING,), (S.ERROR,), (Actor.WORKER,), ("kestrel_core.durable.boundary:WRITE",)),
    Transition(
        "release",
        (S.RUNNING,),
        (S.ENQUEUED,),
        (Actor.WORKER,),
        ("kestrel_core.dispatch.lease:SQL.release", "kestrel_core.durable.checkpoint:SQL.release"),
        closes_attempts=AttemptOutcome.ABANDONED,
    ),
    Transition(
        "sweep-lapsed",
        (S.RUNNING,),
        (S.ENQUEUED,),
        (Actor.SWEEPER,),
        ("kestrel_core.dispatch.sweeper:SQL.sweep_leases",),
        closes_attempts=AttemptOutcome.ABANDONED,
        only_if={S.RUNNING: "its lease lapsed and its worker is not beating for it"},
    ),
    Transition(
        "deadline",
        (S.ENQUEUED, S.RUNNING, S.WAITING),
        (S.ERROR,),
        (Actor.SWEEPER,),
        ("kestrel_core.dispatch.deadlines:SQL.sweep_deadlines",),
        closes_attempts=AttemptOutcome.ABANDONED,
    ),
    Transition(
        "cancel",
        _LIVE,
        (S.CANCELLED,),
        (Actor.OPERATOR,),
        ("cancel_execution.sql", "execution_finished.sql"),
        closes_attempts=AttemptOutcome.CANCELLED,
    ),
    Transition(
        "requeue",
        (S.RUNNING, S.ERROR, S.CANCELLED),
        (S.ENQUEUED,),
        (Actor.OPERATOR,),
        ("requeue_execution.sql",),
        closes_attempts=AttemptOutcome.ABANDONED,
        only_if={S.RUNNING: "its lease expired"},
    ),
    # The step in flight is not cut: its worker's next boundary still closes and checkpoints it.
    Transition("pause", (S.ENQUEUED, S.RUNNING, S.WAITING), (S.PAUSED,), (Actor.OPERATOR,), ("pause_execution.sql",)),
    # Back to 'running' under the claim it was paused under while that claim is alive (a step
    # was in flight: its worker goes on and closes it); otherwise an open attempt is abandoned.
    Transition(
        "resume",
        (S.PAUSED,),
        (S.RUNNING, S.WAITING, S.ENQUEUED),
        (Actor.OPERATOR,),
        ("resume_execution.sql",),
        closes_attempts=AttemptOutcome.ABANDONED,
    ),
    Transition(
        "fork",
        (S.WAITING, S.PAUSED, S.SUCCESS, S.ERROR, S.CANCELLED),
        (S.ENQUEUED,),
        (Actor.OPERATOR,),
        ("fork_execution.sql",),
        new_execution=True,
    ),
)

BY_NAME: Mapping[str, Transition] = {t.name: t for t in TRANSITIONS}


def transition(name: str) -> Transition:
    """The transition called ``name`` (KeyError naming the known ones otherwise)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no transition {name!r}: one of {', '.join(BY_NAME)}") from None


def diagram() -> str:
    """The lifecycle as a mermaid ``stateDiagram-v2``, one edge per (transition, from-state),
    generated from TRANSITIONS (docs/how-it-works.md embeds it; a test keeps them equal)."""
    lines = ["stateDiagram-v2"]
    for t in TRANSITIONS:
        label = t.name + " (" + ", ".join(t.by) + ")"
        sources = ["[*]"] if t.new_execution else [str(s) for s in t.from_states]
        for source in sources:
            for target in t.to:
                note = f", if {t.only_if[S(source)]}" if source in t.only_if else ""
                lines.append(f"    {source} --> {target} : {label}{note}")
    for status in S:
        if not status.live:
            lines.append(f"    {status} --> [*]")
    return "\n".join(lines) + "\n"
