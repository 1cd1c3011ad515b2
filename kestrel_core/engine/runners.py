"""The worker's runner threads and its event loop: they run what the claim loop hands them.

Mixed into ``Worker`` (worker.py). Whatever a workflow raises ends in an outcome (runner.py);
whatever gets past that (an engine bug) is logged and the thread goes on. A runner thread
that dies anyway is replaced at the claim loop's next turn and its claim handed back at once:
the worker never claims for a thread that is gone, nor heartbeats a claim no thread runs. The
event loop of async workflows is run on after a task raised SystemExit or KeyboardInterrupt
out of it (boxing.py keeps steps' and bodies' from getting that far), and after a workflow or
a step stopped it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import psycopg

from kestrel_core.base.describe import exception_head
from kestrel_core.base.masking import first_line
from kestrel_core.durable import checkpoint
from kestrel_core.engine.worker_state import Lifecycle, WorkerState
from kestrel_core.workflow import offload, runner
from kestrel_core.workflow.boxing import being_cancelled, boxed, unbox
from kestrel_core.workflow.contracts import Claimed, EngineSettings

T = TypeVar("T")


class RunnerThreads:
    """The runner-thread half of the worker (what it uses of the rest is declared here)."""

    worker_id: str
    schema: str
    settings: EngineSettings
    log: logging.Logger
    _loop: asyncio.AbstractEventLoop | None
    _runnable: queue.Queue[Claimed | None]
    _runners: list[threading.Thread]
    _running: dict[int, Claimed]
    _inflight: dict[tuple[int, int], Claimed]
    _idle: threading.Condition
    _wake: threading.Event
    lifecycle: Lifecycle

    def db(
        self, fn: Callable[[psycopg.Connection], T], *, window: float | None = None, interruptible: bool = True
    ) -> T:
        raise NotImplementedError

    def _spawn(self, target: Callable[[], Any], name: str) -> threading.Thread:
        raise NotImplementedError

    def await_on_loop(self, awaitable: Any) -> Any:
        """Run a coroutine step on the worker's event loop from a runner thread."""
        if self._loop is None:
            return unbox(asyncio.run(boxed(awaitable)))
        return unbox(asyncio.run_coroutine_threadsafe(boxed(awaitable), self._loop).result())

    def _run_loop(self) -> None:
        """Run the event loop of async workflows until ``stop``. A task that raises SystemExit
        or KeyboardInterrupt (any task: one ``asyncio.wait_for`` or ``gather`` made of a step)
        is finished with it, and asyncio then re-raises it out of ``run_forever``: the loop is
        run on, its other tasks untouched, and the task's awaiter gets the exception. A loop
        stopped by a workflow or a step (``loop.stop()``) is run on likewise: only the worker's
        own stop ends it (``loop.close()`` from a task raises asyncio's RuntimeError in it)."""
        loop = self._loop
        if loop is None:
            return
        while True:
            try:
                loop.run_forever()
                if self.lifecycle.reached(WorkerState.STOPPED) or loop.is_closed():
                    return
                # Stopped by a workflow or a step (``asyncio.get_running_loop().stop()``), not
                # by the worker: every other async execution runs on this loop, so it runs on.
                self.log.warning(
                    "event=loop_resumed worker=%s error='the event loop was stopped by a workflow or a step'",
                    self.worker_id,
                )
            except BaseException as exc:
                if loop.is_closed():
                    return
                self.log.warning(
                    "event=loop_resumed worker=%s error=%r (a task raised it; its awaiter gets it)",
                    self.worker_id,
                    first_line(exception_head(exc)),
                )

    def _runner_loop(self, slot: int) -> None:
        while True:
            held = self._runnable.get()
            if held is None:
                return
            self._running[slot] = held
            try:
                runner.execute(cast(runner.RunnerHost, self), held)
            except BaseException:  # a bug or an unexpected database error: never lose the thread
                self.log.exception(
                    "event=execution_crashed worker=%s execution_id=%s (its lease will lapse and it will be retried)",
                    self.worker_id,
                    held.claim.execution_id,
                )
            finally:
                self._done(held)
                del self._running[slot]  # kept if _done failed: _supervise_runners hands it back

    def _supervise_runners(self) -> None:
        """Replace a runner thread that died, and hand its claim back at once: the worker must
        never claim for a thread that is gone, nor heartbeat a claim no thread runs. (runner.py
        ends whatever a workflow raises in an outcome and the loop above catches the rest, so
        only an engine bug gets here.)"""
        for slot, thread in enumerate(self._runners):
            if thread.is_alive() or self.lifecycle.reached(WorkerState.STOPPED):
                continue
            held = self._running.pop(slot, None)  # before its successor uses the slot
            self._runners[slot] = self._spawn(functools.partial(self._runner_loop, slot), f"runner-{slot}")
            self.log.error(
                "event=runner_died worker=%s thread=%s execution_id=%s (replaced; its claim handed back)",
                self.worker_id,
                thread.name,
                None if held is None else held.claim.execution_id,
            )
            if held is not None:
                with self._idle:
                    self._inflight.pop((held.claim.execution_id, held.claim.claim_epoch), None)
                    self._idle.notify_all()
                try:
                    self.db(
                        functools.partial(
                            checkpoint.release,
                            schema=self.schema,
                            execution_id=held.claim.execution_id,
                            worker_id=self.worker_id,
                            claim_epoch=held.claim.claim_epoch,
                        ),
                        window=0,
                    )
                except psycopg.Error as exc:  # its lease lapses and a sweep hands it back
                    self.log.warning(
                        "event=release_failed worker=%s error=%r", self.worker_id, first_line(exc, self.settings.dsn)
                    )

    def _done(self, held: Claimed) -> None:
        with self._idle:
            self._inflight.pop((held.claim.execution_id, held.claim.claim_epoch), None)
            self._idle.notify_all()
        self._wake.set()

    async def _run_async(self, held: Claimed) -> None:
        loop = asyncio.get_running_loop()
        try:
            offload.repair(loop, self.log, self.worker_id)
            await runner.execute_async(cast(runner.RunnerHost, self), held)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                raise
            # Never out of the task: asyncio re-raises a task's SystemExit or KeyboardInterrupt
            # out of run_forever, which would end the loop every async workflow runs on.
            self.log.exception(
                "event=execution_crashed worker=%s execution_id=%s (its lease will lapse and it will be retried)",
                self.worker_id,
                held.claim.execution_id,
            )
        finally:
            offload.repair(loop, self.log, self.worker_id)  # what this workflow did to the shared loop
            self._done(held)
