"""Gathered async steps under a fake runtime and a tiny switch interval: every step's
checkpoint reaches the writer, so a replay runs none of them again (issue 17).

The runtime is fake (no database: the engine's boundary writes land in a dict, as the fence
and ON CONFLICT would store them) so that thousands of interleavings run in seconds; the
real-Postgres fan-out is tests/core/test_async_fanout.py.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from kestrel_core.base.serialization import as_stored
from kestrel_core.dispatch.claim import Claim
from kestrel_core.durable.boundary import Attempt, Boundary, Outcome
from kestrel_core.durable.checkpoint import Checkpoint
from kestrel_core.workflow.async_context import AsyncWorkflowContext
from kestrel_core.workflow.context import WorkflowContext
from kestrel_core.workflow.contracts import Claimed, Registry

STEPS = 8
RUNS = 1000


class FakeRuntime:
    """The services a context uses, with boundaries stored in memory (first checkpoint wins)."""

    schema = "kestrel"
    worker_id = "fake-worker"
    log = logging.getLogger("tests.fake_runtime")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.draining = threading.Event()
        self.registry = Registry(workflows={}, queues={}, schedules={})
        self.loop = loop
        self.lock = threading.Lock()
        self.checkpoints: dict[str, Checkpoint] = {}
        self.attempts: Counter[str] = Counter()

    def db(self, fn: Any, *, window: float | None = None) -> Any:
        raise AssertionError("a step boundary goes through commit(), not db()")

    def commit(self, b: Boundary, *, after: Any = None) -> Outcome:
        with self.lock:
            written = False
            existing = None
            if b.finish is not None and b.finish.keep:
                stored = self.checkpoints.get(b.finish.step_id)
                if stored is None:
                    self.checkpoints[b.finish.step_id] = Checkpoint(
                        as_stored(b.finish.output), b.finish.error, b.finish.attempt.number, b.finish.position
                    )
                    written = True
                else:
                    existing = (stored.output, stored.error, stored.attempts)
            opened = None
            if b.open_step is not None:
                self.attempts[b.open_step] += 1
                opened = Attempt(self.attempts[b.open_step], datetime.now(UTC))
        return Outcome(
            held=True,
            written=written,
            opened=opened,
            completed=b.complete is not None,
            existing=existing,
            mine=b.finish if written else None,
        )

    def open_lazily(self, b: Boundary) -> Any:
        return None

    def refused(self, execution_id: int, what: str) -> None:
        raise AssertionError(f"nothing is refused here: {what}")

    def await_on_loop(self, awaitable: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self.loop).result()


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


async def fan_out(ctx: AsyncWorkflowContext, ledger: Counter[str], lock: threading.Lock) -> list[Any]:
    def plain(i: int) -> dict[str, int]:
        with lock:
            ledger[f"plain-{i}"] += 1
        return {"i": i, "square": i * i}

    async def coro(i: int) -> dict[str, int]:
        await asyncio.sleep(0)
        with lock:
            ledger[f"coro-{i}"] += 1
        return {"i": i}

    steps = [ctx.step(f"plain-{i}", plain, i) for i in range(STEPS // 2)]
    steps += [ctx.step(f"coro-{i}", coro, i) for i in range(STEPS // 2)]
    return list(await asyncio.gather(*steps))


async def run_once(
    checkpoints: dict[str, Checkpoint],
    runtime_of: list[FakeRuntime],
    ledger: Counter[str],
    lock: threading.Lock,
    claims: int,
) -> list[Any]:
    runtime = FakeRuntime(asyncio.get_running_loop())
    runtime.checkpoints.update(checkpoints)
    runtime_of.append(runtime)
    held = Claimed(
        Claim(execution_id=1, workflow_name="fan-out", input=None, input_later=False, claim_epoch=claims, claims=claims)
    )
    ctx = WorkflowContext(runtime, held, dict(checkpoints))
    return await fan_out(AsyncWorkflowContext(ctx), ledger, lock)


@pytest.fixture
def tiny_switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_gathered_steps_each_run_once_across_a_replay(tiny_switch_interval) -> None:
    lost_runs = []
    started = time.monotonic()
    for run in range(RUNS):
        ledger: Counter[str] = Counter()
        lock = threading.Lock()
        runtimes: list[FakeRuntime] = []
        first = asyncio.run(run_once({}, runtimes, ledger, lock, claims=1))
        stored = dict(runtimes[0].checkpoints)
        replayed = asyncio.run(run_once(stored, runtimes, ledger, lock, claims=2))
        assert replayed == first
        twice = sorted(step for step, n in ledger.items() if n != 1)
        if twice or len(ledger) != STEPS:
            lost_runs.append((run, twice, len(stored)))
    assert lost_runs == [], (
        f"{len(lost_runs)} of {RUNS} runs ran a step twice (checkpoint lost "
        f"before the replay) in {time.monotonic() - started:.1f} s: {lost_runs[:5]}"
    )
