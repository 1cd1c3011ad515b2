"""The ``ctx`` operations that involve other executions: child workflows and events.

Mixed into WorkflowContext (context.py), whose internals (``_use``, ``_write``, ``_boundary``,
``_lost``, the checkpoint map) they use. Each is one durable operation with a position, so a
replay returns what the first run saw: the same child, the same outcome, the same event.
``ExecutionFacts`` (what both contexts tell about the execution) is here too: both import this.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, NoReturn, TypeVar, Unpack

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.base.errors import ChildFailed, InvalidArgument
from kestrel_core.base.masking import first_line
from kestrel_core.base.serialization import to_json
from kestrel_core.dispatch.enqueue import MAX_DELAY, ChildKeywords, EnqueueOptions, check_workflow_name
from kestrel_core.durable import checkpoint, children, events
from kestrel_core.durable.checkpoint import Checkpoint, Fence
from kestrel_core.durable.children import ChildHandle, ChildState
from kestrel_core.durable.events import Event
from kestrel_core.workflow import offload
from kestrel_core.workflow.contracts import Claimed, Unwind, WorkerRuntime

T = TypeVar("T")


def child_options(options: object, **given: Any) -> EnqueueOptions:
    """``start_child``'s options, from ``options=`` or its keywords (``ChildKeywords``,
    ``EnqueueOptions.of``): a child has no idempotency key, its start is once per ``step_id``
    already."""
    chosen = EnqueueOptions.of(options, ChildKeywords, **given)
    if chosen.idempotency_key is not None:
        raise InvalidArgument("a child workflow takes no idempotency_key: its step_id starts it once")
    return chosen


class EventTurn:
    """One event wait's place in the line of waits on its key: a wait receives the first event
    after the one its predecessor received, so it starts only once that one is resolved
    (waits gathered in an async workflow would otherwise all receive the same event). ``done``
    holds None once it resolved, or the reason it unwound instead (parked, lost): then the
    waits after it unwind too, without a write."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done: concurrent.futures.Future[str | None] = concurrent.futures.Future()

    def end(self, exc: BaseException | None) -> None:
        """Resolve it: the wait returned (``exc`` None) or raised ``exc``."""
        reason = None if exc is None else (exc.reason if isinstance(exc, Unwind) else "engine_error")
        if not self.done.done():
            self.done.set_result(reason)

    @staticmethod
    def go_on(reason: str | None) -> None:
        """Go on after a predecessor that ended with ``reason``: unwind as it did, if it did."""
        if reason is not None:
            raise Unwind(reason)


def value_refused(exc: psycopg.Error) -> InvalidArgument | None:
    """The workflow's error when the database refused an engine write for a data exception
    (SQLSTATE class 22: a value out of range, a bad format): a value the workflow gave, which
    the same write would fail to store on every replay; so not a failed engine write (replayed
    every lease, forever, before) but the end of the execution as error."""
    if not isinstance(exc, psycopg.errors.DataError):
        return None
    return InvalidArgument(f"the database refused a value this workflow gave ({exc.sqlstate}): {first_line(exc)}")


def checked_interval(value: timedelta | float | None, what: str, *, required: bool = False) -> timedelta | None:
    """``value`` (a timedelta, or seconds) as a timedelta, checked where the workflow gives it:
    at most ``MAX_DELAY`` either way, so that the database's ``now() + interval`` stays in its
    calendar. Before, a sleep of a billion days failed on the server (22008) as if an engine
    write had failed, and was replayed every lease, forever. InvalidArgument,
    raised in the workflow, otherwise."""
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise InvalidArgument(f"{what} must be a datetime.timedelta or seconds, not {type(value).__name__} ({value!r})")
    limit = MAX_DELAY.total_seconds()
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not -limit <= seconds <= limit:  # NaN too
        raise InvalidArgument(f"{what} out of range ({seconds:g} s; at most {MAX_DELAY.days} days either way)")
    return value if isinstance(value, timedelta) else timedelta(seconds=seconds)


class ExecutionFacts:
    """What both contexts (a sync workflow's and an ``async def`` one's) tell a workflow about
    its execution and this claim, read from the same worker and hold."""

    _worker: WorkerRuntime
    _held: Claimed

    @property
    def execution_id(self) -> int:
        return self._held.claim.execution_id

    @property
    def workflow_name(self) -> str:
        return self._held.claim.workflow_name

    @property
    def input(self) -> Any:
        return self._held.claim.input

    @property
    def worker_id(self) -> str:
        """The worker running this execution now (its ``owner_id``)."""
        return self._worker.worker_id

    @property
    def claim_epoch(self) -> int:
        """Which claim of the execution this is: (worker_id, claim_epoch) fences every write."""
        return self._held.claim.claim_epoch


class FlowOperations(ExecutionFacts):
    """start_child, wait_for, wait_for_all and wait_for_event of a synchronous workflow."""

    # Provided by WorkflowContext (context.py), which mixes these operations in.
    _children: dict[int, ChildState] | None
    _events_seen: dict[str, int]
    _event_turns: dict[str, EventTurn]  # the last wait on each key, in position order
    _lock: threading.Lock  # guards what async operations running at once share

    def _use(self, step_id: str) -> int:
        raise NotImplementedError

    def _stored(self, step_id: str) -> Checkpoint | None:
        raise NotImplementedError

    def _remember(self, step_id: str, stored: Checkpoint) -> None:
        raise NotImplementedError

    def _auto_id(self, base: str) -> str:
        raise NotImplementedError

    def _boundary(self) -> None:
        raise NotImplementedError

    def _lost(self, what: str) -> NoReturn:
        raise NotImplementedError

    def _write(self, fn: Callable[[Any], T]) -> T:
        raise NotImplementedError

    def _operation_at(self, step_id: str, position: int) -> Fence:
        """Where operation ``step_id`` at ``position`` writes: this execution, under this claim."""
        return Fence(self.execution_id, self._worker.worker_id, self._held.claim.claim_epoch, step_id, position)

    def start_child(
        self,
        name: str,
        input: Any = None,
        *,
        step_id: str | None = None,
        options: EnqueueOptions | None = None,
        **given: Unpack[ChildKeywords],
    ) -> ChildHandle:
        """Enqueue workflow ``name`` as a child of this execution, once: a replay returns the
        same child. ``step_id`` defaults to ``child-N:name`` (N counts this execution's starts).
        The options (``priority``, ``delay``, ``run_at``, ``queue``, ``concurrency_key``, or
        ``options``) mean what they mean for ``app.enqueue`` (queue: the child workflow's own
        by default)."""
        chosen = child_options(options, **given)
        op = step_id or self._auto_id(f"child:{check_workflow_name(name)}")
        return self._start_child(self._use(op), op, name, input, chosen)

    def wait_for(
        self,
        handle: ChildHandle | dict[str, Any],
        timeout: timedelta | float | None = None,
        *,
        step_id: str | None = None,
    ) -> Any:
        """Park until the child ends; its output, or ChildFailed if it errored or was cancelled
        (or, with ``timeout``, is still live then: ``ChildFailed.timed_out``)."""
        handle = ChildHandle.of(handle)
        op = step_id or self._auto_id(f"wait:{handle.step_id}")
        return self._wait_children(self._use(op), op, [handle], timeout)[0]

    def wait_for_all(
        self,
        handles: Sequence[ChildHandle | dict[str, Any]],
        timeout: timedelta | float | None = None,
        *,
        step_id: str | None = None,
    ) -> list[Any]:
        """Park once until every child ends; their outputs in order, or ChildFailed for the
        first (in order) that did not succeed."""
        found = [ChildHandle.of(h) for h in handles]
        if not found:
            return []
        op = step_id or self._auto_id(f"wait-all:{found[0].step_id}+{len(found) - 1}")
        return self._wait_children(self._use(op), op, found, timeout)

    def wait_for_event(
        self, key: str, timeout: timedelta | float | None = None, *, step_id: str | None = None
    ) -> Event:
        """Park until ``app.send_event(key, ...)``; an Event (``.payload``), or one with
        ``timed_out=True`` once ``timeout`` passes. Events sent since this execution was
        enqueued count, also before the wait is reached (see events.py)."""
        events.check_key(key)
        op = step_id or self._auto_id(f"event:{key}")
        position = self._use(op)
        return self._wait_event(position, op, key, timeout, self._event_turn(key))

    # -- implementations (positions taken by the caller) --------------------------------------

    def _start_child(self, position: int, op: str, name: str, input: Any, options: EnqueueOptions) -> ChildHandle:
        stored = self._stored(op)
        if stored is not None:
            return ChildHandle(stored.output["child_id"], stored.output["workflow"], op)
        check_workflow_name(name)
        payload = to_json(input, f"the input of child workflow {name!r}")
        # queue and version as app.enqueue places them: from this process's code of the child
        placed, version = options.placed(self._worker.registry.workflows, name)
        self._boundary()
        child_id = self._write(
            lambda c: children.start(
                c,
                self._worker.schema,
                self._operation_at(op, position),
                name=name,
                input=payload,
                options=placed,
                version=version,
            )
        )
        if child_id is None:
            self._lost(f"child {op!r} not started")
        self._remember(op, Checkpoint({"child_id": child_id, "workflow": name}, position=position))
        return ChildHandle(child_id, name, op)

    def _child_states(self, refresh: bool = False) -> dict[int, ChildState]:
        if self._children is None or refresh:
            self._children = self._write(lambda c: children.states(c, self._worker.schema, self.execution_id))
        return self._children

    def _wait_children(
        self, position: int, op: str, handles: list[ChildHandle], timeout: timedelta | float | None
    ) -> list[Any]:
        stored = self._stored(op)
        if stored is not None and (stored.output or {}).get("timed_out"):
            states = self._child_states()
            late = next(
                (h for h in handles if not (h.execution_id in states and states[h.execution_id].done)), handles[0]
            )
            state = states.get(late.execution_id)
            raise ChildFailed(
                late.execution_id, late.workflow_name, state.status if state else "missing", None, timed_out=True
            )
        if stored is not None:
            outcomes = stored.output["children"]
        else:
            outcomes = self._collect(position, op, handles, checked_interval(timeout, f"the timeout of wait {op!r}"))
        for outcome in outcomes:
            if outcome["status"] != "success":
                raise ChildFailed(outcome["child_id"], outcome["workflow"], outcome["status"], outcome["error"])
        return [outcome["output"] for outcome in outcomes]

    def _collect(
        self, position: int, op: str, handles: list[ChildHandle], after: timedelta | None
    ) -> list[dict[str, Any]]:
        """Every child's outcome, checkpointed; parks (Unwind) while one is still live."""
        states = self._child_states()
        live = [h.execution_id for h in handles if not (h.execution_id in states and states[h.execution_id].done)]
        if live:
            self._boundary()
            at = self._operation_at(op, position)
            owned, parked = self._write(lambda c: children.park(c, self._worker.schema, at, children=live, after=after))
            if not owned:
                self._lost(f"wait {op!r} not parked")
            if parked:
                raise Unwind("parked")
            states = self._child_states(refresh=True)  # they finished meanwhile
        outcomes = [
            states[h.execution_id].outcome()
            if h.execution_id in states
            else {
                "child_id": h.execution_id,
                "workflow": h.workflow_name,
                "status": "missing",
                "output": None,
                "error": "no such child of this execution (pruned, or started by another one)",
            }
            for h in handles
        ]
        output = {"children": outcomes}
        failed = next((o for o in outcomes if o["status"] != "success"), None)
        error = None if failed is None else f"child execution {failed['child_id']} ended {failed['status']}"
        if not self._write(
            lambda c: checkpoint.record(c, self._worker.schema, self._operation_at(op, position), Jsonb(output), error)
        ):
            self._lost(f"wait {op!r} not checkpointed")
        self._remember(op, Checkpoint(output, position=position))
        return outcomes

    def _event_turn(self, key: str) -> tuple[EventTurn | None, EventTurn]:
        """The turn of the wait on ``key`` that just took its position: (its predecessor's, its own)."""
        mine = EventTurn()
        with self._lock:
            prior = self._event_turns.get(key)
            self._event_turns[key] = mine
        return prior, mine

    def _wait_event(
        self,
        position: int,
        op: str,
        key: str,
        timeout: timedelta | float | None,
        turn: tuple[EventTurn | None, EventTurn],
    ) -> Event:
        prior, mine = turn
        try:
            if prior is not None:
                EventTurn.go_on(prior.done.result())
            event = self._receive_event(position, op, key, timeout)
        except BaseException as exc:
            mine.end(exc)
            raise
        mine.end(None)
        return event

    def _receive_event(self, position: int, op: str, key: str, timeout: timedelta | float | None) -> Event:
        stored = self._stored(op)
        if stored is None:
            self._boundary()
            owned, received = self._write(
                lambda c: events.receive_or_park(
                    c,
                    self._worker.schema,
                    self._operation_at(op, position),
                    key=key,
                    after_id=self._events_seen.get(key, 0),
                    after=checked_interval(timeout, f"the timeout of event wait {op!r}"),
                )
            )
            if not owned:
                self._lost(f"event wait {op!r} not parked")
            if received is None:
                raise Unwind("parked")
            stored = Checkpoint(received, position=position)
            self._remember(op, stored)
        event = Event.from_checkpoint(key, stored.output or {})
        if event.event_id is not None:
            with self._lock:
                self._events_seen[key] = max(self._events_seen.get(key, 0), event.event_id)
        return event


class AsyncFlowOperations:
    """The same operations for ``async def`` workflows (positions taken before any await)."""

    _sync: FlowOperations

    async def start_child(
        self,
        name: str,
        input: Any = None,
        *,
        step_id: str | None = None,
        options: EnqueueOptions | None = None,
        **given: Unpack[ChildKeywords],
    ) -> ChildHandle:
        """See WorkflowContext.start_child."""
        chosen = child_options(options, **given)
        op = step_id or self._sync._auto_id(f"child:{check_workflow_name(name)}")
        return await offload.to_thread(self._sync._start_child, self._sync._use(op), op, name, input, chosen)

    async def wait_for(
        self,
        handle: ChildHandle | dict[str, Any],
        timeout: timedelta | float | None = None,
        *,
        step_id: str | None = None,
    ) -> Any:
        """See WorkflowContext.wait_for."""
        handle = ChildHandle.of(handle)
        op = step_id or self._sync._auto_id(f"wait:{handle.step_id}")
        return (await offload.to_thread(self._sync._wait_children, self._sync._use(op), op, [handle], timeout))[0]

    async def wait_for_all(
        self,
        handles: Sequence[ChildHandle | dict[str, Any]],
        timeout: timedelta | float | None = None,
        *,
        step_id: str | None = None,
    ) -> list[Any]:
        """See WorkflowContext.wait_for_all."""
        found = [ChildHandle.of(h) for h in handles]
        if not found:
            return []
        op = step_id or self._sync._auto_id(f"wait-all:{found[0].step_id}+{len(found) - 1}")
        return await offload.to_thread(self._sync._wait_children, self._sync._use(op), op, found, timeout)

    async def wait_for_event(
        self, key: str, timeout: timedelta | float | None = None, *, step_id: str | None = None
    ) -> Event:
        """See WorkflowContext.wait_for_event."""
        events.check_key(key)
        op = step_id or self._sync._auto_id(f"event:{key}")
        position = self._sync._use(op)  # position and turn before any await: in call order
        prior, mine = self._sync._event_turn(key)
        try:
            if prior is not None:  # waited for on the loop: a line of waits holds no thread
                # shielded: cancelling this wait must not cancel the predecessor's future
                EventTurn.go_on(await asyncio.shield(asyncio.wrap_future(prior.done)))
            event = await offload.to_thread(self._sync._receive_event, position, op, key, timeout)
        except BaseException as exc:
            mine.end(exc)
            raise
        mine.end(None)
        return event
