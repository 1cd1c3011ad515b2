"""The invariants a chaos run must keep, checked on the database it leaves behind.

1. Every execution enqueued reached a terminal state (success: the workload never fails), and
   none appeared that was not enqueued.
2. Each (execution, step) has exactly one checkpoint, for exactly the steps the workflow has.
3. The workflow's output equals what the checkpoints hold (the nonce of every step, in order,
   and the gate's decision): a replay never re-ran a checkpointed step.
4. Fencing. Every side effect records the claim (worker, epoch) it ran under. Then:
   - the output names the claim that completed it, which must be the execution's last claim
     (``claim_epoch``): a stale worker that completes after another claimed it is caught here;
   - the side effect whose nonce the checkpoint kept must come from the newest claim that ran
     the step: a newer claim only runs a step when it sees no checkpoint, so an older claim
     winning means it checkpointed after losing the execution;
   - the successful attempt of the step, if any, is that same claim's (attempt rows are
     bookkeeping, committed asynchronously: a server crash may lose one, which is counted).
5. Duplicated side effects (more than one ledger row for a step) are allowed only for a run
   cut off by the chaos: its worker was SIGKILLed while it ran (the effect at most
   ``IN_FLIGHT_S`` before the kill), or SIGSTOPped around it, or frozen (SIGSTOP, operator
   requeue, SIGCONT) while it ran: the effect before the freeze, never after the resume; or the
   database was down around it (the lease could lapse meanwhile). They are counted.
6. Schedules: every worker's scheduler ticks the one-second schedule; each tick was enqueued
   exactly once (no tick twice, none missing between the first and the last) and its run succeeded.
7. Queue limits: the executions routed to the limited queue are the ones in it, and the running
   counts sampled from the table every few milliseconds through the run (sampler.py) never
   exceed its concurrency, nor its per-key limit for any concurrency key.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from .workload import FAILING, LIMITED_CONCURRENCY, LIMITED_PER_KEY, LIMITED_QUEUE, effect_steps, expected_steps

EXECUTIONS = """
SELECT id, coalesce(engine_key, idempotency_key), status, input, output, error, owner_id, claim_epoch
  FROM kestrel.workflow_executions ORDER BY id
"""
CHECKPOINTS = "SELECT execution_id, step_id, output, error, owner_id FROM kestrel.operation_outputs"
LEDGER = """
SELECT execution_id, step_id, owner_id, claim_epoch, nonce, extract(epoch FROM at)::float8
  FROM public.chaos_ledger
"""
SUCCESS_ATTEMPTS = """
SELECT execution_id, step_id, owner_id, claim_epoch FROM kestrel.step_attempts WHERE outcome = 'success'
"""
# Reported, not a violation: attempts a finished execution still shows as running (the
# timeline would draw them open-ended).
OPEN_ATTEMPTS = """
SELECT count(*) FROM kestrel.step_attempts a JOIN kestrel.workflow_executions e ON e.id = a.execution_id
 WHERE a.outcome = 'running' AND e.status IN ('success', 'error', 'cancelled')
"""
# When each claim ended: the first change of a running execution to another status or claim.
CLAIM_ENDS = """
SELECT execution_id, old_epoch, min(extract(epoch FROM at)::float8) FROM public.chaos_transitions
 WHERE old_status = 'running' AND (new_status <> 'running' OR new_epoch IS DISTINCT FROM old_epoch)
 GROUP BY execution_id, old_epoch
"""
STEP_STARTS = "SELECT execution_id, step_id, owner_id, claim_epoch, started FROM public.chaos_ledger"
ATTEMPT_STARTS = """
SELECT execution_id, step_id, claim_epoch, min(extract(epoch FROM started_at)::float8)
  FROM kestrel.step_attempts GROUP BY execution_id, step_id, claim_epoch
"""
IN_QUEUE = "SELECT idempotency_key FROM kestrel.workflow_executions WHERE queue = %s"
GATES = "SELECT execution_id, decision, decided_by FROM kestrel.workflow_waits WHERE kind = 'approval'"

# Seconds of slack around a disruption when explaining a duplicate (clock reads on one host).
SLACK_S = 3.0
# How long before a kill a run may have started and still be in flight (its work, at most
# 2.3 s in the workload, and its boundary's commit): a kill explains nothing older.
IN_FLIGHT_S = 5.0
# A freeze explains only runs its SIGSTOP cut off: started before it (this slack covers the
# signal's delivery), not the runs the worker starts once resumed.
FREEZE_SLACK_S = 0.5
# How late a step's function may begin after the fence that let it start (a thread hand-off on
# a loaded machine): a step that began later than this after its claim ended is a violation.
START_SLACK_S = 0.3


@dataclass(frozen=True)
class Disruption:
    """Something the killer did: kill/stop name a worker; outage is the database being down."""

    kind: str  # "kill", "stop", "freeze" (stop, operator requeue, continue), "outage", "lock"
    worker: str | None  # "lock": the worker running the execution when it was locked
    start: float  # time.time()
    end: float
    execution: int | None = None  # "lock": the execution whose row another session held


@dataclass
class Verdict:
    """What the checks found: counts to print and every violation (empty when all hold)."""

    executions: int = 0
    fan_outs: int = 0  # of them, async fan-outs (gathered steps, then a sleep)
    statuses: Counter = field(default_factory=Counter)
    side_effects: int = 0
    duplicates: int = 0
    duplicates_by_cause: Counter = field(default_factory=Counter)
    open_attempts: int = 0
    attempts_lost: int = 0
    ticks: int = 0  # runs the schedule enqueued (checked apart from the chain executions)
    limited: int = 0  # executions in the limited queue
    limit_samples: int = 0  # reads of its running count
    max_running: int = 0  # the most seen running in it at once ...
    max_per_key: int = 0  # ... and under one concurrency key
    cancelled: int = 0  # executions the harness cancelled (early: before or at their first step)
    failed_as_meant: int = 0  # deadlines before the first step, SystemExit and CancelledError steps
    late_starts_checked: int = 0  # step runs checked against the end of their claim
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def fail(self, message: str) -> None:
        self.violations.append(message)


def verify(
    conn: psycopg.Connection,
    expected_keys: set[str],
    disruptions: list[Disruption],
    lease_s: float,
    *,
    limited_keys: set[str] | None = None,
    samples: Sequence[tuple[int, int]] | None = None,
    cancelled_keys: set[str] | None = None,
) -> Verdict:
    """Check every invariant on the database a chaos run left; ``conn`` is an admin connection.
    ``limited_keys``: the executions routed to the limited queue; ``samples``: the sampler's
    (running, most running under one key) reads of it; ``cancelled_keys``: the executions the
    harness cancelled (acknowledged), which must end cancelled."""
    v = Verdict()
    cancelled_keys = cancelled_keys or set()
    _check_claim_ends(v, conn)
    if limited_keys is not None:
        in_queue = {key for (key,) in conn.execute(IN_QUEUE, (LIMITED_QUEUE,))}
        v.limited = len(in_queue)
        for key in sorted(limited_keys - in_queue)[:10]:
            v.fail(f"execution {key} was enqueued on queue {LIMITED_QUEUE} but is not in it")
        for key in sorted(in_queue - limited_keys, key=str)[:10]:
            v.fail(f"execution {key} is in queue {LIMITED_QUEUE} but was not enqueued there")
    if samples is not None:
        check_limits(v, samples, LIMITED_CONCURRENCY, LIMITED_PER_KEY)
    executions = conn.execute(EXECUTIONS).fetchall()
    checkpoints: dict[int, dict[str, tuple[Any, str | None, str | None]]] = defaultdict(dict)
    for eid, step, output, error, owner in conn.execute(CHECKPOINTS):
        checkpoints[eid][step] = (output, error, owner)
    ledger: dict[tuple[int, str], list[tuple[str, int, int, float]]] = defaultdict(list)
    for eid, step, owner, epoch, nonce, at in conn.execute(LEDGER):
        ledger[(eid, step)].append((owner, epoch, nonce, at))
    attempts: dict[tuple[int, str], list[tuple[str, int]]] = defaultdict(list)
    for eid, step, owner, epoch in conn.execute(SUCCESS_ATTEMPTS):
        attempts[(eid, step)].append((owner, epoch))
    gates = {eid: (decision, by) for eid, decision, by in conn.execute(GATES)}
    scheduled = [row for row in executions if (row[1] or "").startswith("schedule:")]
    executions = [row for row in executions if not (row[1] or "").startswith("schedule:")]
    _check_ticks(v, scheduled)

    v.executions = len(executions)
    keys = {row[1] for row in executions}
    for key in sorted(expected_keys - keys)[:10]:
        v.fail(f"enqueued execution {key} is missing")
    for key in sorted(keys - expected_keys, key=str)[:10]:
        v.fail(f"execution {key} exists but was never enqueued")

    known = set()
    for eid, key, status, spec, output, error, owner_id, claim_epoch in executions:
        known.add(eid)
        v.statuses[status] += 1
        v.fan_outs += isinstance(spec, dict) and "fan" in spec
        if key in cancelled_keys:
            v.cancelled += 1
            if status != "cancelled":
                v.fail(f"execution {eid} was cancelled but ended {status}")
            continue
        if isinstance(spec, dict) and spec.get("expect"):
            _check_failing(v, eid, spec, status, error, ledger)
            continue
        if status != "success":
            v.fail(f"execution {eid} ended {status}, not success: {(error or '').splitlines()[:1]}")
            continue
        steps = expected_steps(spec)
        have = checkpoints.get(eid, {})
        if set(have) != steps:
            v.fail(f"execution {eid}: checkpoints {sorted(have)} != steps {sorted(steps)}")
            continue
        _check_output(v, eid, spec, output, have, gates.get(eid))
        if (output.get("owner"), output.get("epoch")) != (owner_id, claim_epoch):
            v.fail(
                f"execution {eid} was completed by {output.get('owner')} epoch {output.get('epoch')}, "
                f"but its last claim is {owner_id} epoch {claim_epoch}: a stale worker completed it"
            )
        for step in effect_steps(spec):
            _check_step(
                v,
                eid,
                step,
                have[step],
                ledger.get((eid, step), []),
                attempts.get((eid, step), []),
                claim_epoch,
                disruptions,
                lease_s,
            )
    orphans = {eid for eid, _ in ledger} - known
    if orphans:
        v.fail(f"side effects recorded for executions that do not exist: {sorted(orphans)[:10]}")
    v.side_effects = sum(len(rows) for rows in ledger.values())
    v.open_attempts = conn.execute(OPEN_ATTEMPTS).fetchone()[0]
    return v


def _check_claim_ends(v: Verdict, conn: psycopg.Connection) -> None:
    """No step began after its claim ended (cancel, deadline, park, sweep, requeue, completion):
    every run in the ledger, by the time its function began, against the end of the claim it
    ran under; a run whose attempt the engine opened (fenced) before that end, and that only
    began a little later, is the step in flight that a fence cannot stop."""
    ends = {(eid, epoch): at for eid, epoch, at in conn.execute(CLAIM_ENDS)}
    opened = {(eid, step, epoch): at for eid, step, epoch, at in conn.execute(ATTEMPT_STARTS)}
    for eid, step, owner, epoch, started in conn.execute(STEP_STARTS):
        v.late_starts_checked += 1
        end = ends.get((eid, epoch))
        if end is None or started <= end + START_SLACK_S:
            continue
        fenced = opened.get((eid, step, epoch))
        if fenced is not None and fenced <= end + START_SLACK_S:
            continue
        v.fail(
            f"execution {eid} step {step} started under claim ({owner}, epoch {epoch}) "
            f"{started - end:.2f} s after that claim ended"
        )


def _check_failing(
    v: Verdict,
    eid: int,
    spec: dict[str, Any],
    status: str,
    error: str | None,
    ledger: dict[tuple[int, str], list[tuple[str, int, int, float]]],
) -> None:
    """An execution meant to fail (``FAILING``): it ended error saying why; one whose deadline
    passed before its first step ran no step."""
    why = FAILING[spec["expect"]]
    if status != "error" or why not in (error or ""):
        v.fail(
            f"execution {eid} ({spec['expect']}) ended {status}, not error ({why}): {(error or '').splitlines()[-1:]}"
        )
        return
    v.failed_as_meant += 1
    if spec["expect"] == "deadline" and ledger.get((eid, "s0")):
        v.fail(f"execution {eid}: its deadline passed before its first step, which ran anyway")


def _check_ticks(v: Verdict, scheduled: list[tuple]) -> None:
    """Each tick of the one-second schedule enqueued once, none missing, every run a success."""
    v.ticks = len(scheduled)
    seen: Counter = Counter()
    for eid, key, status, spec, output, error, _, _ in scheduled:
        tick = spec.get("scheduled_at") if isinstance(spec, dict) else None
        seen[tick] += 1
        if key != f"schedule:{spec.get('schedule')}:{tick}":
            v.fail(f"scheduled execution {eid}: key {key} does not name its tick {tick}")
        if status != "success" or output != tick:
            v.fail(f"scheduled execution {eid} (tick {tick}) ended {status} with {output!r}: {error}")
    for tick, n in sorted(seen.items(), key=lambda kv: str(kv[0])):
        if n > 1:
            v.fail(f"tick {tick} was enqueued {n} times")
    ticks = sorted(datetime.fromisoformat(t) for t in seen if t)
    for a, b in zip(ticks, ticks[1:]):
        if b - a != timedelta(seconds=1):
            v.fail(f"ticks missing between {a.isoformat()} and {b.isoformat()}")


def check_limits(v: Verdict, samples: Sequence[tuple[int, int]], concurrency: int, per_key: int) -> None:
    """The limited queue never ran more than ``concurrency`` at once, nor more than ``per_key``
    under one concurrency key, in any sample; and there were samples to judge by."""
    v.limit_samples = len(samples)
    if not samples:
        v.fail(f"no sample of queue {LIMITED_QUEUE}'s running count: its limits went unchecked")
        return
    v.max_running = max(running for running, _ in samples)
    v.max_per_key = max(keyed for _, keyed in samples)
    over = sum(running > concurrency for running, _ in samples)
    if over:
        v.fail(
            f"queue {LIMITED_QUEUE}: {v.max_running} running at once (limit {concurrency}), "
            f"over the limit in {over} of {len(samples)} samples"
        )
    over_key = sum(keyed > per_key for _, keyed in samples)
    if over_key:
        v.fail(
            f"queue {LIMITED_QUEUE}: {v.max_per_key} running under one concurrency key (limit "
            f"{per_key}), over the limit in {over_key} of {len(samples)} samples"
        )


def _check_output(
    v: Verdict,
    eid: int,
    spec: dict[str, Any],
    output: Any,
    have: dict[str, tuple[Any, str | None, str | None]],
    gate: tuple | None,
) -> None:
    nonces = [have[step][0] for step in effect_steps(spec)]
    if not isinstance(output, dict) or output.get("nonces") != nonces or output.get("sum") != sum(nonces):
        v.fail(f"execution {eid}: output {output!r} does not match its checkpoints {nonces}")
        return
    if spec.get("gate"):
        stored = have["gate"][0]
        decision = output.get("decision") or {}
        if decision.get("approved") != stored.get("approved") or decision.get("timed_out") != stored.get("timed_out"):
            v.fail(f"execution {eid}: output decision {decision} != gate checkpoint {stored}")
        want = {"approve": "approved", "reject": "rejected", "timeout": "timed_out"}[spec["gate"]]
        if gate is None or gate[0] != want:
            v.fail(f"execution {eid}: gate decided {gate}, expected {want}")


def _check_step(
    v: Verdict,
    eid: int,
    step: str,
    checkpoint: tuple[Any, str | None, str | None],
    runs: list[tuple[str, int, int, float]],
    success: list[tuple[str, int]],
    last_epoch: int,
    disruptions: list[Disruption],
    lease_s: float,
) -> None:
    output, error, cp_owner = checkpoint
    if error is not None:
        v.fail(f"execution {eid} step {step}: failed for good: {error.splitlines()[0]}")
        return
    winners = [run for run in runs if run[2] == output]
    if len(winners) != 1:
        v.fail(
            f"execution {eid} step {step}: checkpoint {output} matches {len(winners)} side effects "
            f"(the kept result must come from exactly one real run)"
        )
        return
    w_owner, w_epoch, _, _ = winners[0]
    newest = max(epoch for _, epoch, _, _ in runs)
    if w_epoch != newest:
        v.fail(
            f"execution {eid} step {step}: the checkpoint kept the run of epoch {w_epoch} ({w_owner}) "
            f"though epoch {newest} ran the step later: a stale claim checkpointed"
        )
    if cp_owner != w_owner:
        v.fail(f"execution {eid} step {step}: checkpoint written by {cp_owner}, result from {w_owner}")
    if success == []:
        v.attempts_lost += 1  # attempts commit asynchronously: a crash may lose the row
    elif success != [(w_owner, w_epoch)]:
        v.fail(f"execution {eid} step {step}: successful attempts {success}, expected [({w_owner}, {w_epoch})]")
    if newest > last_epoch:
        v.fail(f"execution {eid} step {step}: ran under epoch {newest}, after its last claim {last_epoch}")
    for run in runs:
        if run is winners[0]:
            continue
        v.duplicates += 1
        cause = explain_duplicate(run, disruptions, lease_s, eid)
        if cause is None:
            owner, epoch, _, at = run
            v.fail(
                f"execution {eid} step {step}: duplicate side effect by {owner} epoch {epoch} at "
                f"{at:.3f} that no kill, stop or outage explains"
            )
        else:
            v.duplicates_by_cause[cause] += 1


def stalled(owner: str, since: float, until: float, disruptions: list[Disruption]) -> float:
    """Seconds between ``since`` and ``until`` during which another session held the row of one
    of ``owner``'s executions: the worker's step boundaries (one writer per process) wait for
    such a lock, so a run of any of its executions stays in flight that much longer."""
    return sum(
        min(d.end, until) - max(d.start, since)
        for d in disruptions
        if d.kind == "lock" and d.worker == owner and d.start < until and d.end > since
    )


def explain_duplicate(
    run: tuple[str, int, int, float], disruptions: list[Disruption], lease_s: float, eid: int | None = None
) -> str | None:
    """The disruption that cut this run off before its checkpoint, or None. A lock another
    session held on the execution's row explains a rerun of that execution only (its lease
    may lapse meanwhile), never one of the worker's other executions."""
    owner, _, _, at = run
    for d in disruptions:
        if d.kind == "lock" and d.execution == eid and d.start - IN_FLIGHT_S <= at <= d.end + lease_s + SLACK_S:
            return "lock"
    for d in disruptions:
        held = stalled(owner, at, d.start, disruptions)
        if d.kind == "stop" and d.worker == owner and d.start - SLACK_S - held <= at <= d.end + SLACK_S:
            return "stop"
        if d.kind == "freeze" and d.worker == owner and d.start - IN_FLIGHT_S - held <= at <= d.start + FREEZE_SLACK_S:
            return "freeze"
        if d.kind == "kill" and d.worker == owner and d.start - IN_FLIGHT_S - held <= at <= d.start + SLACK_S:
            return "kill"
    for d in disruptions:
        if d.kind == "outage" and d.start - lease_s - SLACK_S <= at <= d.end + lease_s + SLACK_S:
            return "outage"
    return None
