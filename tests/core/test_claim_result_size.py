"""A claim's result is small whatever the inputs (issue 43 review (e)).

The claim statements returned each execution's input: a worker that froze (SIGSTOP, a GC
pause) while reading a claim of large inputs held the claim transaction open (through
PgBouncer, and on the limited path, the claim is a transaction that commits after the read),
the rows locked and the leases running. Now they return ids, epochs and the workflow name, and
an input only when it is small (at most CLAIM_INPUT_MAX_BYTES, uncompressed); a larger input is
read afterwards by the runner thread, outside the claim. Measured here on the wire: every
cell of every result of every claim statement the engine runs, on a row with a 5 MB input.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.dispatch import claim as claim_mod
from kestrel_core.dispatch import queues as queues_mod
from kestrel_core.engine.worker import Worker
from tests.waiting import wait_for

BIG = 5 * 1024 * 1024
# What a claim's cell may be: a small input (512 bytes of jsonb) as text, with room.
MAX_CELL = 1024


class Measured(psycopg.Cursor[Any]):
    """A cursor that records the largest cell of every result it receives."""

    largest: list[int] = []

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        out = super().execute(*args, **kwargs)
        result = self.pgresult
        if result is not None:
            for row in range(result.ntuples):
                for col in range(result.nfields):
                    Measured.largest.append(len(result.get_value(row, col) or b""))
        return out


def big_input() -> dict[str, str]:
    return {"blob": os.urandom(BIG // 2).hex()}  # incompressible


@pytest.fixture
def measured(app: Kestrel) -> Iterator[Callable[[], psycopg.Connection]]:
    opened: list[psycopg.Connection] = []

    def connect() -> psycopg.Connection:
        conn = psycopg.connect(app.dsn, autocommit=True, prepare_threshold=None, cursor_factory=Measured)
        opened.append(conn)
        return conn

    Measured.largest = []
    yield connect
    for conn in opened:
        conn.close()


def claim_all(conn: psycopg.Connection, schema: str, **options: Any) -> list[claim_mod.Claim]:
    return claim_mod.claim_batch(
        conn, schema, worker_id="w1", names=["big", "small"], n=10, lease=timedelta(seconds=30), **options
    )[0]


@pytest.mark.parametrize("path", ["fast", "behind", "slices", "limited"])
def test_no_claim_statement_returns_a_large_input(
    app: Kestrel, measured: Callable[[], psycopg.Connection], path: str
) -> None:
    conn = measured()
    options: dict[str, Any] = {"claim_session": False}
    queue = None
    if path == "limited":
        queue = "lim"
        queues_mod.declare(conn, app.schema, [queues_mod.Queue("lim", 5, None, None, 0, 1)], {})
    elif path == "behind":  # the look behind a mark past every row: a walk of the index from the start
        options["mark"] = claim_mod.ClaimMark(key=claim_mod.END_KEY)
    elif path == "slices":  # the look behind in slices of the heap (walks cancelled)
        options["mark"] = claim_mod.ClaimMark(
            key=claim_mod.END_KEY, slices=claim_mod.BehindPass(blocks=1 << 20, whole=True)
        )
    big = app.enqueue("big", big_input(), queue=queue)
    small = app.enqueue("small", {"n": 1}, queue=queue)
    Measured.largest = []
    claims = {c.execution_id: c for c in claim_all(conn, app.schema, **options)}
    assert set(claims) == {big, small}
    assert max(Measured.largest) <= MAX_CELL, f"a claim returned a cell of {max(Measured.largest)} bytes"
    assert claims[small].input == {"n": 1}, "a small input comes with the claim"


def test_a_worker_runs_a_large_input_read_after_its_claim(app: Kestrel, start_worker: Callable[..., Worker]) -> None:
    @app.workflow("big")
    def big(ctx: Any, data: dict[str, str]) -> int:
        return len(ctx.step("measure", lambda: data["blob"]))

    @app.workflow("small")
    def small(ctx: Any, data: Any) -> Any:
        return data

    value = big_input()
    ids = [app.enqueue("big", value), app.enqueue("small", {"n": 2}), app.enqueue("small", None)]
    start_worker(app, lease=timedelta(seconds=1))
    wait_for(lambda: all(app.get(i).status == "success" for i in ids), timeout=30, what="the executions to finish")
    assert [app.get(i).output for i in ids] == [len(value["blob"]), {"n": 2}, None]
