"""Bulk actions on a frozen set of ids (issue 47, kestrel_core.admin.bulk): the token acts on
exactly the ids frozen, each row under its own state rule (a refusal recorded with its reason),
audited with the batch's id; a token is refused when unknown, previewed for another action,
used up or expired; two consoles applying one batch act on each row once; --rate paces it;
the operator role can do all of it and write none of the tables by hand."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import psycopg
import pytest

from kestrel_core import ActionRefused, InvalidArgument, Kestrel, NotFound
from kestrel_core.admin import bulk_apply, bulk_freeze, bulk_items, bulk_reasons, bulk_status


def _finish(db: psycopg.Connection, eid: int, status: str = "success") -> None:
    db.execute("UPDATE workflow_executions SET status = %s, finished_at = now() WHERE id = %s", (status, eid))


def test_the_token_acts_on_exactly_the_frozen_ids_each_under_its_own_rule(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(7)])
    _finish(db, ids[0])
    with app.connection() as conn:
        frozen = bulk_freeze(conn, app.schema, "cancel", [*ids[:6], ids[2]], by="alice", filter_text="workflow:w")
        assert frozen.total == 6  # duplicates once; ids[6] not frozen
        late = app.enqueue("w", {"late": True})
        _finish(db, ids[1], "error")
        done = bulk_apply(conn, app.schema, frozen.token, action="cancel", by="bob", comment="why", chunk=4)
        assert (done.done, done.refused, done.left, done.total) == (4, 2, 0, 6)
        assert [r["reason"] for r in bulk_reasons(conn, app.schema, frozen.batch_id)] == [
            "cannot cancel: execution # already finished (error)",
            "cannot cancel: execution # already finished (success)",
        ]
        rows = bulk_items(conn, app.schema, frozen.batch_id)
        assert [(r["execution_id"], r["outcome"]) for r in rows] == [
            (ids[0], "refused"), (ids[1], "refused"), *[(i, "done") for i in ids[2:6]],
        ]  # fmt: skip
        assert rows[2]["result"] == {"was": "enqueued"} and rows[2]["acted_by"] == "bob"
        assert bulk_status(conn, app.schema, frozen.token)["finished_at"] is not None
    statuses = dict(db.execute("SELECT id, status FROM workflow_executions").fetchall())
    assert [statuses[i] for i in ids] == ["success", "error", *["cancelled"] * 4, "enqueued"]
    assert statuses[late] == "enqueued"
    audit = db.execute(
        "SELECT actor, action, execution_id, comment, batch_id, details FROM operator_actions ORDER BY id"
    )
    rows = audit.fetchall()
    assert rows[0][:5] == ("alice", "bulk", None, None, None)
    assert rows[0][5]["batch_id"] == frozen.batch_id and rows[0][5]["total"] == 6
    assert rows[0][5]["filter"] == "workflow:w"
    assert rows[1:] == [("bob", "cancel", i, "why", frozen.batch_id, None) for i in ids[2:6]]


def test_a_token_is_refused_unknown_for_another_action_used_up_or_expired(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(3)])
    with app.connection() as conn:
        with pytest.raises(NotFound, match="unknown bulk token 'b9-nope'"):
            bulk_apply(conn, app.schema, "b9-nope", action="cancel", by="a")
        frozen = bulk_freeze(conn, app.schema, "cancel", ids, by="a")
        with pytest.raises(ActionRefused, match="previewed for cancel, not requeue"):
            bulk_apply(conn, app.schema, frozen.token, action="requeue", by="a")
        db.execute("UPDATE bulk_batches SET expires_at = now() - interval '1 second' WHERE id = %s", (frozen.batch_id,))
        with pytest.raises(ActionRefused, match="expired at .*: preview again"):
            bulk_apply(conn, app.schema, frozen.token, action="cancel", by="a")
        assert bulk_status(conn, app.schema, frozen.token)["left"] == 3  # nothing done
        # A batch begun before its expiry may be resumed after it: the rows are the previewed ones.
        other = bulk_freeze(conn, app.schema, "cancel", ids[:2], by="a")
        db.execute("UPDATE bulk_batches SET started_at = now(), expires_at = now() - interval '1 s' WHERE id = %s",
                   (other.batch_id,))  # fmt: skip
        assert bulk_apply(conn, app.schema, other.token, action="cancel", by="a").done == 2
        with pytest.raises(ActionRefused, match=r"already used: batch \d+ finished at .* \(2 done, 0 refused\)"):
            bulk_apply(conn, app.schema, other.token, action="cancel", by="a")
        with pytest.raises(InvalidArgument, match="no execution selected"):
            bulk_freeze(conn, app.schema, "cancel", [], by="a")
        with pytest.raises(InvalidArgument, match="no bulk action 'explode'"):
            bulk_freeze(conn, app.schema, "explode", ids, by="a")
        with pytest.raises(InvalidArgument, match="bulk fork needs from_step"):
            bulk_freeze(conn, app.schema, "fork", ids, by="a")
        with pytest.raises(InvalidArgument, match="rate"):
            bulk_apply(conn, app.schema, frozen.token, action="cancel", by="a", rate=0)


def test_bulk_requeue_and_fork_keep_each_rows_rule(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(3)])
    _finish(db, ids[0], "error")
    _finish(db, ids[1], "success")
    for seq, eid in enumerate(ids[:2], start=1):
        db.execute(
            "INSERT INTO operation_outputs (execution_id, step_id, output, seq) VALUES (%s, 'a', %s, %s)",
            (eid, json.dumps(1), seq),
        )
    with app.connection() as conn:
        frozen = bulk_freeze(conn, app.schema, "requeue", ids, by="a")
        out = bulk_apply(conn, app.schema, frozen.token, action="requeue", by="a")
        assert (out.done, out.refused) == (1, 2)
        _finish(db, ids[0], "error")
        forks = bulk_freeze(conn, app.schema, "fork", ids, by="a", params={"from_step": "a", "version": None})
        out = bulk_apply(conn, app.schema, forks.token, action="fork", by="a")
        assert (out.done, out.refused) == (2, 1)
        rows = {r["execution_id"]: r for r in bulk_items(conn, app.schema, forks.batch_id)}
    assert "is enqueued" in rows[ids[2]]["reason"]
    new = [rows[i]["result"]["fork_id"] for i in ids[:2]]
    assert db.execute(
        "SELECT origin_id FROM execution_forks WHERE fork_id = ANY(%s) ORDER BY origin_id", (new,)
    ).fetchall() == [(ids[0],), (ids[1],)]


def test_bulk_pause_then_resume_keep_each_rows_rule(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(4)])
    _finish(db, ids[0])
    with app.connection() as conn:
        frozen = bulk_freeze(conn, app.schema, "pause", ids, by="a")
        out = bulk_apply(conn, app.schema, frozen.token, action="pause", by="a", comment="incident")
        assert (out.done, out.refused) == (3, 1)
        assert [r["reason"] for r in bulk_reasons(conn, app.schema, frozen.batch_id)] == [
            "cannot pause: execution # already finished (success)"
        ]
        assert bulk_items(conn, app.schema, frozen.batch_id, "done")[0]["result"] == {"was": "enqueued"}
        # ids[3] resumed by hand meanwhile: the bulk resume refuses it, resumes the others.
        app.resume(ids[3], by="b")
        back = bulk_freeze(conn, app.schema, "resume", ids, by="a")
        out = bulk_apply(conn, app.schema, back.token, action="resume", by="a")
        assert (out.done, out.refused) == (2, 2)
        reasons = {r["reason"] for r in bulk_reasons(conn, app.schema, back.batch_id)}
        assert reasons == {
            "cannot resume: execution # is not paused (it is success)",
            "cannot resume: execution # is not paused (it is enqueued)",
        }
        assert bulk_items(conn, app.schema, back.batch_id, "done")[0]["result"] == {"now": "enqueued"}
    statuses = dict(db.execute("SELECT id, status FROM workflow_executions").fetchall())
    assert [statuses[i] for i in ids] == ["success", "enqueued", "enqueued", "enqueued"]
    assert db.execute(
        "SELECT action, execution_id, batch_id FROM operator_actions WHERE action IN ('pause', 'resume') ORDER BY id"
    ).fetchall() == [
        *[("pause", i, frozen.batch_id) for i in ids[1:]], ("resume", ids[3], None),
        *[("resume", i, back.batch_id) for i in ids[1:3]],
    ]  # fmt: skip


def test_two_consoles_applying_one_batch_act_on_each_row_once(app: Kestrel, db: psycopg.Connection) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(300)])
    with app.connection() as conn:
        frozen = bulk_freeze(conn, app.schema, "cancel", ids, by="a")
    errors: list[BaseException] = []

    def run(by: str) -> None:
        try:
            with app.connection() as conn:
                bulk_apply(conn, app.schema, frozen.token, action="cancel", by=by, chunk=7)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"op{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # The second may find the batch finished by the first when it begins: that is its refusal.
    assert all(isinstance(e, ActionRefused) and "already used" in str(e) for e in errors), errors
    assert db.execute(
        "SELECT count(*), count(DISTINCT execution_id) FROM operator_actions WHERE action = 'cancel'"
    ).fetchone() == (300, 300)
    assert db.execute("SELECT count(*) FROM bulk_batch_items WHERE outcome = 'done'").fetchone() == (300,)


def test_rate_paces_the_chunks(app: Kestrel) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(50)])
    slept: list[float] = []
    sizes: list[int] = []
    with app.connection() as conn:
        frozen = bulk_freeze(conn, app.schema, "cancel", ids, by="a")
        bulk_apply(
            conn, app.schema, frozen.token, action="cancel", by="a", rate=20, sleep=slept.append,
            progress=lambda p: sizes.append(p.done_now + p.refused_now),
        )  # fmt: skip
    assert sizes == [20, 40, 50]
    # Sleeps fill each second up to 20 rows (the clock is not advanced by the recorded sleeps).
    assert len(slept) == 2 and 0.5 < slept[0] <= 1.0 and 1.5 < slept[1] <= 2.0, slept


def test_the_operator_role_freezes_and_applies_but_writes_no_table_by_hand(
    app: Kestrel, db: psycopg.Connection, operator_dsn: str
) -> None:
    ids = app.enqueue_many("w", [{"n": i} for i in range(3)])
    with Kestrel(operator_dsn) as operator, operator.connection() as conn:
        frozen = bulk_freeze(conn, operator.schema, "cancel", ids[:2], by="op")
        assert bulk_apply(conn, operator.schema, frozen.token, action="cancel", by="op").done == 2
        for statement in (
            "UPDATE kestrel.bulk_batch_items SET outcome = 'done'",
            "UPDATE kestrel.bulk_batches SET expires_at = now() + interval '1 year'",
            "DELETE FROM kestrel.bulk_batch_items",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        # Naming a batch by hand around a single cancel does not tag it: the row is not the batch's.
        with conn.transaction():
            conn.execute("SELECT set_config('kestrel.bulk_batch', %s, true)", (str(frozen.batch_id),))
            conn.execute("SELECT kestrel.cancel_execution(%s, 'op', NULL)", (ids[2],))
    assert db.execute(
        "SELECT execution_id, batch_id FROM operator_actions WHERE action = 'cancel' ORDER BY execution_id"
    ).fetchall() == [(ids[0], frozen.batch_id), (ids[1], frozen.batch_id), (ids[2], None)]


@pytest.mark.parametrize("ttl", [timedelta(0), timedelta(days=8)])
def test_a_token_lives_a_second_to_a_week(app: Kestrel, ttl: timedelta) -> None:
    eid = app.enqueue("w", None)
    with app.connection() as conn, pytest.raises(psycopg.errors.InvalidParameterValue):
        bulk_freeze(conn, app.schema, "cancel", [eid], by="a", ttl=ttl)
