"""The DBOS Transact side of the comparison: the same no-op workflows of 1 and 5 steps.

Imported only by the DBOS worker process (``python -m bench.dbos_worker``); needs ``dbos``
(the optional extra ``bench``).
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

QUEUE = "bench"


@DBOS.step(name="noop")
def noop() -> None:
    return None


@DBOS.workflow(name="noop1")
def noop1(_input: Any) -> None:
    noop()


@DBOS.workflow(name="noop5")
def noop5(_input: Any) -> None:
    for _ in range(5):
        noop()


@DBOS.workflow(name="warmup")
def warmup(_input: Any) -> None:
    noop()
    noop()
