"""The chaos checks have teeth: each broken invariant, written into a database by hand, is
reported (and a clean history is not). ``python -m tests.chaos --break-fence`` shows the same
on a live run with the engine's fences removed."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from .checks import Disruption, verify
from .workload import LEDGER_DDL, LIMITED_CONCURRENCY, LIMITED_PER_KEY, LIMITED_QUEUE

LEASE = 4.0
SPEC = {"steps": 2, "work_ms": 10, "nap": None, "gate": None}


@pytest.fixture
def chaos_db(db: psycopg.Connection) -> psycopg.Connection:
    db.execute("DROP TABLE IF EXISTS public.chaos_ledger, public.chaos_transitions")
    db.execute(LEDGER_DDL)
    return db


def execution(
    db: psycopg.Connection,
    key: str,
    *,
    owner: str,
    epoch: int,
    nonces: list[int],
    out_owner: str | None = None,
    out_epoch: int | None = None,
    status: str = "success",
    spec: dict[str, Any] = SPEC,
) -> int:
    output = {
        "nonces": nonces,
        "sum": sum(nonces),
        "owner": out_owner or owner,
        "epoch": out_epoch or epoch,
        "decision": None,
    }
    return db.execute(
        "INSERT INTO kestrel.workflow_executions (workflow_name, status, input, output, owner_id,"
        " claim_epoch, idempotency_key, finished_at) VALUES ('chain', %s, %s, %s, %s, %s, %s, now())"
        " RETURNING id",
        (status, Jsonb(spec), Jsonb(output), owner, epoch, key),
    ).fetchone()[0]


def step(
    db: psycopg.Connection,
    eid: int,
    step_id: str,
    *,
    nonce: int,
    owner: str,
    epoch: int,
    at: float | None = None,
    checkpoint: bool = True,
) -> None:
    """A real run of a step (ledger row); with ``checkpoint`` it is the one the checkpoint kept."""
    db.execute(
        "INSERT INTO public.chaos_ledger (nonce, execution_id, step_id, owner_id, claim_epoch, pid, started, at)"
        " VALUES (%s, %s, %s, %s, %s, 1, %s, to_timestamp(%s))",
        (
            nonce,
            eid,
            step_id,
            owner,
            epoch,
            at if at is not None else time.time(),
            at if at is not None else time.time(),
        ),
    )
    if checkpoint:
        db.execute(
            "INSERT INTO kestrel.operation_outputs (execution_id, step_id, output, owner_id) VALUES (%s, %s, %s, %s)",
            (eid, step_id, Jsonb(nonce), owner),
        )
        db.execute(
            "INSERT INTO kestrel.step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch,"
            " outcome) VALUES (%s, %s, 1, %s, %s, 'success')",
            (eid, step_id, owner, epoch),
        )


def clean_execution(db: psycopg.Connection, key: str = "k1") -> int:
    eid = execution(db, key, owner="w1", epoch=1, nonces=[11, 12])
    step(db, eid, "s0", nonce=11, owner="w1", epoch=1)
    step(db, eid, "s1", nonce=12, owner="w1", epoch=1)
    return eid


def test_a_clean_history_passes(chaos_db: psycopg.Connection) -> None:
    clean_execution(chaos_db)
    verdict = verify(chaos_db, {"k1"}, [], LEASE)
    assert verdict.ok, verdict.violations
    assert (verdict.executions, verdict.side_effects, verdict.duplicates) == (1, 2, 0)


def test_a_stale_completion_is_caught(chaos_db: psycopg.Connection) -> None:
    # w2 (epoch 2) ran everything, but the output says w1 epoch 1 completed it.
    eid = execution(chaos_db, "k1", owner="w2", epoch=2, nonces=[11, 12], out_owner="w1", out_epoch=1)
    step(chaos_db, eid, "s0", nonce=11, owner="w2", epoch=2)
    step(chaos_db, eid, "s1", nonce=12, owner="w2", epoch=2)
    verdict = verify(chaos_db, {"k1"}, [], LEASE)
    assert any("stale worker completed it" in v for v in verdict.violations), verdict.violations


def test_a_stale_checkpoint_is_caught(chaos_db: psycopg.Connection) -> None:
    # Epoch 2 ran s1 (so it saw no checkpoint), yet the checkpoint kept epoch 1's result.
    killed_at = time.time()
    eid = execution(chaos_db, "k1", owner="w2", epoch=2, nonces=[11, 12])
    step(chaos_db, eid, "s0", nonce=11, owner="w1", epoch=1)
    step(chaos_db, eid, "s1", nonce=12, owner="w1", epoch=1, at=killed_at - 1)
    step(chaos_db, eid, "s1", nonce=99, owner="w2", epoch=2, checkpoint=False)
    verdict = verify(chaos_db, {"k1"}, [Disruption("kill", "w1", killed_at, killed_at)], LEASE)
    assert any("a stale claim checkpointed" in v for v in verdict.violations), verdict.violations


def s0_run_twice(chaos_db: psycopg.Connection) -> tuple[int, float]:
    """Execution k1's s0 run by w1 (epoch 1, no checkpoint) 100 s ago, then again by w2 (epoch
    2), which finished it: a duplicate. (k1's id, when w1 ran it.)"""
    eid = execution(chaos_db, "k1", owner="w2", epoch=2, nonces=[11, 12])
    ran_at = time.time() - 100
    step(chaos_db, eid, "s0", nonce=10, owner="w1", epoch=1, at=ran_at, checkpoint=False)
    step(chaos_db, eid, "s0", nonce=11, owner="w2", epoch=2)
    step(chaos_db, eid, "s1", nonce=12, owner="w2", epoch=2)
    return eid, ran_at


def test_a_duplicate_needs_a_disruption_to_explain_it(chaos_db: psycopg.Connection) -> None:
    _, ran_at = s0_run_twice(chaos_db)

    unexplained = verify(chaos_db, {"k1"}, [], LEASE)
    assert unexplained.duplicates == 1
    assert any("that no kill, stop or outage explains" in v for v in unexplained.violations)
    # w1 killed long after its run: not what cut it off.
    wrong_kill = verify(chaos_db, {"k1"}, [Disruption("kill", "w3", ran_at + 1, ran_at + 1)], LEASE)
    assert not wrong_kill.ok

    killed = verify(chaos_db, {"k1"}, [Disruption("kill", "w1", ran_at + 0.5, ran_at + 0.5)], LEASE)
    assert killed.ok and killed.duplicates_by_cause == {"kill": 1}
    outage = verify(chaos_db, {"k1"}, [Disruption("outage", None, ran_at + 1, ran_at + 2)], LEASE)
    assert outage.ok and outage.duplicates_by_cause == {"outage": 1}


def test_output_must_match_the_checkpoints(chaos_db: psycopg.Connection) -> None:
    eid = execution(chaos_db, "k1", owner="w1", epoch=1, nonces=[11, 13])  # s1 re-ran on replay
    step(chaos_db, eid, "s0", nonce=11, owner="w1", epoch=1)
    step(chaos_db, eid, "s1", nonce=12, owner="w1", epoch=1)
    verdict = verify(chaos_db, {"k1"}, [], LEASE)
    assert any("does not match its checkpoints" in v for v in verdict.violations), verdict.violations


def test_missing_checkpoints_lost_and_unfinished_executions_are_caught(chaos_db: psycopg.Connection) -> None:
    eid = execution(chaos_db, "k1", owner="w1", epoch=1, nonces=[11, 12])
    step(chaos_db, eid, "s0", nonce=11, owner="w1", epoch=1)  # s1 never checkpointed
    execution(chaos_db, "k2", owner="w1", epoch=1, nonces=[], status="running")
    verdict = verify(chaos_db, {"k1", "k2", "k3"}, [], LEASE)
    text = "\n".join(verdict.violations)
    assert "checkpoints ['s0'] != steps ['s0', 's1']" in text
    assert "ended running, not success" in text
    assert "enqueued execution k3 is missing" in text


def tick_run(db: psycopg.Connection, second: int, *, key_second: int | None = None, status: str = "success") -> None:
    tick = f"2026-01-05T12:00:{second:02d}+00:00"
    key = f"schedule:chaos-tick:2026-01-05T12:00:{(second if key_second is None else key_second):02d}+00:00"
    db.execute(
        "INSERT INTO kestrel.workflow_executions (workflow_name, status, input, output, engine_key)"
        " VALUES ('tick', %s, %s, %s, %s)",
        (status, Jsonb({"schedule": "chaos-tick", "scheduled_at": tick}), Jsonb(tick), key),
    )


def test_schedule_ticks_once_each_without_gaps(chaos_db: psycopg.Connection) -> None:
    clean_execution(chaos_db)
    for second in (0, 1, 2):
        tick_run(chaos_db, second)
    clean = verify(chaos_db, {"k1"}, [], LEASE)
    assert clean.ok and clean.ticks == 3 and clean.executions == 1, clean.violations

    tick_run(chaos_db, 2, key_second=9)  # tick 2 enqueued a second time, under another key
    tick_run(chaos_db, 5, status="error")  # ticks 3 and 4 missing; 5 failed
    text = "\n".join(verify(chaos_db, {"k1"}, [], LEASE).violations)
    assert "tick 2026-01-05T12:00:02+00:00 was enqueued 2 times" in text
    assert "does not name its tick" in text
    assert "ticks missing between 2026-01-05T12:00:02+00:00 and 2026-01-05T12:00:05+00:00" in text
    assert "(tick 2026-01-05T12:00:05+00:00) ended error" in text


def test_queue_limits_exceeded_in_any_sample_are_caught(chaos_db: psycopg.Connection) -> None:
    clean_execution(chaos_db)
    within = [(0, 0), (2, 1), (LIMITED_CONCURRENCY, LIMITED_PER_KEY), (1, 0)]
    clean = verify(chaos_db, {"k1"}, [], LEASE, samples=within)
    assert clean.ok, clean.violations
    assert (clean.limit_samples, clean.max_running, clean.max_per_key) == (4, LIMITED_CONCURRENCY, LIMITED_PER_KEY)

    over = [*within, (LIMITED_CONCURRENCY + 1, 1), (2, LIMITED_PER_KEY + 1), (1, 0)]
    text = "\n".join(verify(chaos_db, {"k1"}, [], LEASE, samples=over).violations)
    assert (
        f"queue {LIMITED_QUEUE}: {LIMITED_CONCURRENCY + 1} running at once (limit {LIMITED_CONCURRENCY}), "
        f"over the limit in 1 of 7 samples"
    ) in text
    assert (
        f"queue {LIMITED_QUEUE}: {LIMITED_PER_KEY + 1} running under one concurrency key "
        f"(limit {LIMITED_PER_KEY}), over the limit in 1 of 7 samples"
    ) in text
    # a sampler that read nothing proves nothing
    assert any("its limits went unchecked" in v for v in verify(chaos_db, {"k1"}, [], LEASE, samples=[]).violations)


def test_an_execution_not_in_the_queue_it_was_routed_to_is_caught(chaos_db: psycopg.Connection) -> None:
    clean_execution(chaos_db, "k1")
    eid = execution(chaos_db, "k2", owner="w1", epoch=1, nonces=[21, 22])
    step(chaos_db, eid, "s0", nonce=21, owner="w1", epoch=1)
    step(chaos_db, eid, "s1", nonce=22, owner="w1", epoch=1)
    assert verify(chaos_db, {"k1", "k2"}, [], LEASE, limited_keys=set()).ok
    text = "\n".join(verify(chaos_db, {"k1", "k2"}, [], LEASE, limited_keys={"k2"}).violations)
    assert f"execution k2 was enqueued on queue {LIMITED_QUEUE} but is not in it" in text
    chaos_db.execute("UPDATE kestrel.workflow_executions SET queue = %s WHERE id = %s", (LIMITED_QUEUE, eid))
    assert verify(chaos_db, {"k1", "k2"}, [], LEASE, limited_keys={"k2"}).ok
    text = "\n".join(verify(chaos_db, {"k1", "k2"}, [], LEASE, limited_keys=set()).violations)
    assert f"execution k2 is in queue {LIMITED_QUEUE} but was not enqueued there" in text


def test_a_freeze_explains_only_the_runs_it_cut_off(chaos_db: psycopg.Connection) -> None:
    frozen_at = time.time() - 100
    resumed_at = frozen_at + 6
    eid = execution(chaos_db, "k1", owner="w1", epoch=3, nonces=[11, 12])
    step(chaos_db, eid, "s0", nonce=10, owner="w1", epoch=1, at=frozen_at - 0.2, checkpoint=False)  # cut off
    step(chaos_db, eid, "s0", nonce=11, owner="w1", epoch=2)
    # the resumed worker ran s1 under its new claim, then again: a run the freeze cannot explain
    step(chaos_db, eid, "s1", nonce=98, owner="w1", epoch=2, at=resumed_at + 0.5, checkpoint=False)
    step(chaos_db, eid, "s1", nonce=12, owner="w1", epoch=3)
    freeze = [Disruption("freeze", "w1", frozen_at, resumed_at)]
    verdict = verify(chaos_db, {"k1"}, freeze, LEASE)
    assert verdict.duplicates == 2 and verdict.duplicates_by_cause == {"freeze": 1}
    assert [v for v in verdict.violations if "duplicate side effect" in v] == [
        f"execution {eid} step s1: duplicate side effect by w1 epoch 2 at {resumed_at + 0.5:.3f} "
        "that no kill, stop or outage explains"
    ]


def test_a_kill_explains_only_a_run_in_flight(chaos_db: psycopg.Connection) -> None:
    _, ran_at = s0_run_twice(chaos_db)
    assert not verify(chaos_db, {"k1"}, [Disruption("kill", "w1", ran_at + 60, ran_at + 60)], LEASE).ok


def test_an_async_fan_out_is_checked_step_by_step(chaos_db: psycopg.Connection) -> None:
    spec = {"fan": 2, "work_ms": 10, "nap": 0.3}
    eid = execution(chaos_db, "k1", owner="w1", epoch=2, nonces=[21, 22, 23], spec=spec)
    step(chaos_db, eid, "f0", nonce=21, owner="w1", epoch=1)
    step(chaos_db, eid, "f1", nonce=22, owner="w1", epoch=1)
    chaos_db.execute(
        "INSERT INTO kestrel.operation_outputs (execution_id, step_id, output) VALUES (%s, 'nap', '{}')", (eid,)
    )
    step(chaos_db, eid, "after", nonce=23, owner="w1", epoch=2)
    clean = verify(chaos_db, {"k1"}, [], LEASE)
    assert clean.ok and clean.fan_outs == 1, clean.violations
    # a gathered step whose checkpoint was lost ran again on the replay: caught
    step(chaos_db, eid, "f1", nonce=24, owner="w1", epoch=2, checkpoint=False)
    assert any("duplicate side effect by w1 epoch 2" in v for v in verify(chaos_db, {"k1"}, [], LEASE).violations)


def claim_ended(db: psycopg.Connection, eid: int, epoch: int, at: float, new_status: str = "cancelled") -> None:
    """What the trigger records when claim ``epoch`` of ``eid`` ends at ``at``."""
    db.execute(
        "INSERT INTO public.chaos_transitions"
        " (execution_id, old_status, new_status, old_owner, old_epoch, new_epoch, at)"
        " VALUES (%s, 'running', %s, 'w1', %s, %s, to_timestamp(%s))",
        (eid, new_status, epoch, epoch, at),
    )


def test_a_step_started_after_its_claim_ended_is_caught(chaos_db: psycopg.Connection) -> None:
    ended = time.time() - 50
    eid = execution(chaos_db, "k1", owner="w1", epoch=2, nonces=[11, 12])
    step(chaos_db, eid, "s0", nonce=11, owner="w1", epoch=2)
    step(chaos_db, eid, "s1", nonce=12, owner="w1", epoch=2)
    claim_ended(chaos_db, eid, 1, ended, new_status="enqueued")  # swept; claim 2 ran it all
    step(chaos_db, eid, "s0", nonce=10, owner="w1", epoch=1, at=ended - 1, checkpoint=False)  # in flight
    kill = [Disruption("kill", "w1", ended - 0.5, ended - 0.5)]
    assert verify(chaos_db, {"k1"}, kill, LEASE).ok
    # claim 1 began s1 two seconds after it ended (the resumed worker of break 1)
    step(chaos_db, eid, "s1", nonce=9, owner="w1", epoch=1, at=ended + 2, checkpoint=False)
    text = "\n".join(verify(chaos_db, {"k1"}, kill, LEASE).violations)
    assert f"execution {eid} step s1 started under claim (w1, epoch 1) 2.00 s after that claim ended" in text


def test_a_step_the_fence_let_start_before_the_end_is_in_flight(chaos_db: psycopg.Connection) -> None:
    ended = time.time() - 50
    eid = execution(chaos_db, "k1", owner="w1", epoch=2, nonces=[11, 12])
    step(chaos_db, eid, "s0", nonce=11, owner="w1", epoch=2)
    step(chaos_db, eid, "s1", nonce=12, owner="w1", epoch=2)
    claim_ended(chaos_db, eid, 1, ended)
    # its attempt was opened (fenced) before the end; its function began late (a freeze there)
    chaos_db.execute(
        "INSERT INTO kestrel.step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, started_at)"
        " VALUES (%s, 's1', 2, 'w1', 1, to_timestamp(%s))",
        (eid, ended - 0.1),
    )
    step(chaos_db, eid, "s1", nonce=9, owner="w1", epoch=1, at=ended + 3, checkpoint=False)
    freeze = [Disruption("freeze", "w1", ended - 0.05, ended + 2.9)]
    verdict = verify(chaos_db, {"k1"}, freeze, LEASE)
    assert not [v for v in verdict.violations if "after that claim ended" in v], verdict.violations


def test_executions_meant_to_fail_and_cancelled_ones_are_held_to_it(chaos_db: psycopg.Connection) -> None:
    clean_execution(chaos_db, "k1")
    timed = execution(
        chaos_db, "k2", owner="w1", epoch=1, nonces=[], status="error", spec={"expect": "deadline", "pre_ms": 1700}
    )
    chaos_db.execute("UPDATE kestrel.workflow_executions SET error = 'timed out after 1s' WHERE id = %s", (timed,))
    exited = execution(
        chaos_db, "k3", owner="w1", epoch=1, nonces=[], status="error", spec={"expect": "exit_step", "pre_ms": 0}
    )
    chaos_db.execute("UPDATE kestrel.workflow_executions SET error = 'StepFailed: boom' WHERE id = %s", (exited,))
    execution(chaos_db, "k4", owner="w1", epoch=1, nonces=[], status="cancelled")
    keys = {"k1", "k2", "k3", "k4"}
    verdict = verify(chaos_db, keys, [], LEASE, cancelled_keys={"k4"})
    assert verdict.ok and (verdict.failed_as_meant, verdict.cancelled) == (2, 1), verdict.violations

    step(chaos_db, timed, "s0", nonce=31, owner="w1", epoch=1, checkpoint=False)  # ran past its deadline
    chaos_db.execute("UPDATE kestrel.workflow_executions SET status = 'success' WHERE id = %s", (exited,))
    text = "\n".join(verify(chaos_db, keys, [], LEASE, cancelled_keys={"k1", "k4"}).violations)
    assert f"execution {timed}: its deadline passed before its first step, which ran anyway" in text
    assert f"execution {exited} (exit_step) ended success, not error (boom)" in text
    assert "was cancelled but ended success" in text


def test_a_lock_explains_a_rerun_of_the_locked_execution_only(chaos_db: psycopg.Connection) -> None:
    eid, ran_at = s0_run_twice(chaos_db)
    locked = verify(chaos_db, {"k1"}, [Disruption("lock", None, ran_at + 0.5, ran_at + 5, execution=eid)], LEASE)
    assert locked.ok and locked.duplicates_by_cause == {"lock": 1}, locked.violations
    # a lock on another execution of the same worker explains nothing (break 5)
    other = verify(chaos_db, {"k1"}, [Disruption("lock", None, ran_at + 0.5, ran_at + 5, execution=eid + 1)], LEASE)
    assert any("that no kill, stop or outage explains" in v for v in other.violations)


def test_a_lock_on_a_sibling_keeps_the_workers_runs_in_flight(chaos_db: psycopg.Connection) -> None:
    # w1 ran s0 of k1, then a lock on another of w1's executions held its step boundaries (one
    # writer per process) for 5 s; SIGSTOPped before the checkpoint went out, it lost the claim
    eid, ran_at = s0_run_twice(chaos_db)
    stop = Disruption("stop", "w1", ran_at + 7, ran_at + 12)
    assert not verify(chaos_db, {"k1"}, [stop], LEASE).ok  # ran 7 s before the stop: long done
    sibling = Disruption("lock", "w1", ran_at + 1, ran_at + 6, execution=eid + 1)
    held = verify(chaos_db, {"k1"}, [stop, sibling], LEASE)
    assert held.ok and held.duplicates_by_cause == {"stop": 1}, held.violations
    elsewhere = Disruption("lock", "w3", ran_at + 1, ran_at + 6, execution=eid + 1)  # another worker's
    assert not verify(chaos_db, {"k1"}, [stop, elsewhere], LEASE).ok
