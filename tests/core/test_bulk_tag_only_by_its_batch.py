"""An operator's single action never passes for a bulk batch's (review r44b found it did).

Promise (migration 0031, schema/functions/tag_bulk_batch.sql, docs): every operator write is
audited, and a row of operator_actions carries a bulk batch's id only when that batch did it
("a setting made by hand around a single action tags nothing it did not freeze").

Before migration 0035 the trigger trusted the session's custom setting ``kestrel.bulk_batch``, which any login may set,
and checks only that the execution is an item of the batch, not that bulk_apply_chunk is
running, nor that the batch was begun. Reproduction, as an operator login:
    SELECT bulk_freeze('cancel', '{}', ARRAY[id], 'x', 'alice', '1 hour');  -- never begun
    BEGIN; SELECT set_config('kestrel.bulk_batch', '<batch id>', true);
    SELECT cancel_execution(id, 'mallory', 'by hand'); COMMIT;
The audit row of mallory's hand-made cancel has batch_id = alice's batch.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from kestrel_core import Kestrel
from kestrel_core.admin import bulk_freeze


def test_a_hand_made_action_is_not_tagged_with_a_batch_that_did_not_do_it(
    app: Kestrel, db: psycopg.Connection, operator_dsn: str
) -> None:
    eid = app.enqueue("w", {})
    with psycopg.connect(operator_dsn, autocommit=True) as op:
        frozen = bulk_freeze(op, app.schema, "cancel", [eid], by="alice", filter_text="workflow:w")
        with op.transaction():
            op.execute("SELECT set_config('kestrel.bulk_batch', %s, true)", (str(frozen.batch_id),))
            op.execute(
                sql.SQL("SELECT {}.cancel_execution(%s, 'mallory', 'by hand')").format(sql.Identifier(app.schema)),
                (eid,),
            )
    row = db.execute(
        "SELECT actor, batch_id FROM operator_actions WHERE action = 'cancel' AND execution_id = %s", (eid,)
    ).fetchone()
    assert row is not None and row[0] == "mallory"
    started = db.execute("SELECT started_at FROM bulk_batches WHERE id = %s", (frozen.batch_id,)).fetchone()
    assert started == (None,)  # the batch was never begun: it did nothing
    assert row[1] is None, f"mallory's cancel by hand is recorded as done by batch {row[1]}"


def test_no_login_but_the_owner_can_mark_an_action_as_a_batch_s(
    app: Kestrel, operator_dsn: str, reader_dsn: str
) -> None:
    """The tag now comes from a row of bulk_applying that only bulk_apply_chunk writes."""
    eid = app.enqueue("w", {})
    with psycopg.connect(operator_dsn, autocommit=True) as op:
        frozen = bulk_freeze(op, app.schema, "cancel", [eid], by="alice", filter_text="workflow:w")
    for dsn in (operator_dsn, reader_dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(
                    sql.SQL("INSERT INTO {}.bulk_applying VALUES (txid_current(), %s, %s)").format(
                        sql.Identifier(app.schema)
                    ),
                    (frozen.batch_id, eid),
                )
