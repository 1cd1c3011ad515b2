# Generated from kestrel_core/api/async_operations.py by tools/async_to_sync.py: do not edit.
# Change the async source and run `python tools/async_to_sync.py`.
"""The sync twin of ``kestrel_core.api.async_operations``, generated: read that module."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Unpack

import psycopg
from psycopg.rows import class_row
from psycopg_pool import ConnectionPool, PoolTimeout

from kestrel_core.admin import actions as _operator
from kestrel_core.admin import cron as _cron
from kestrel_core.admin import execution as _execution
from kestrel_core.admin import prune as _prune
from kestrel_core.admin import schedules as _schedules
from kestrel_core.admin.identity import default_operator
from kestrel_core.base.errors import InvalidArgument, from_database
from kestrel_core.db import migrate as _migrate
from kestrel_core.db import roles as _roles
from kestrel_core.db.connection import ConnectionRunner, connect, unavailable, wrong_connection
from kestrel_core.db.outage import is_outage
from kestrel_core.db.retry import RETRY, Verdict
from kestrel_core.db.roles import RoleNames
from kestrel_core.db.statements import render
from kestrel_core.dispatch import enqueue as _enqueue
from kestrel_core.dispatch import queues as _queues
from kestrel_core.dispatch import sweeper as _sweeper
from kestrel_core.durable import events as _events

POOL_WAIT_S = 15


class Operations(ABC):
    """Enqueue, read and act on executions; the shell gives the pool and the batcher."""

    dsn: str
    schema: str
    transaction_pooling: bool
    application_name: str

    @abstractmethod
    def _ensure_pool(self) -> ConnectionPool:
        """The open pool (opened, and the schema checked, at the first call)."""

    @abstractmethod
    def _submit(self, row: _enqueue.Row) -> int:
        """``row`` written by the group commit of concurrent enqueues; its id."""

    @abstractmethod
    def _registry(self) -> dict[str, Any]:
        """The registered workflows that place new executions (their queue and version)."""

    @abstractmethod
    def _prune_runner(self) -> ConnectionRunner:
        """``prune``'s way to a (sync) connection."""

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection to the Kestrel database (schema checked once). A
        statement's error is DatabaseUnavailable only when the server is gone (``is_outage``):
        a timeout or a deadlock stays itself."""
        pool = self._ensure_pool()
        taken: psycopg.Connection | None = None
        try:
            with pool.connection(timeout=POOL_WAIT_S) as conn:
                taken = conn
                yield conn
        except PoolTimeout as exc:
            raise unavailable(self.dsn, exc) from None
        except psycopg.Error as exc:
            if is_outage(exc, taken):
                raise unavailable(self.dsn, exc) from None
            raise

    @contextmanager
    def _on(self, conn: psycopg.Connection | None) -> Iterator[psycopg.Connection]:
        """The caller's connection (in its transaction), else a pooled one."""
        if conn is None:
            with self.connection() as pooled:
                yield pooled
        else:
            yield self._caller_connection(conn)

    def _caller_connection(self, conn: object) -> psycopg.Connection:
        """``conn`` if it is a connection of this client's kind (the caller's, in its transaction)."""
        if not isinstance(conn, psycopg.Connection):
            raise InvalidArgument(wrong_connection(conn, psycopg.Connection))
        return conn

    @property
    def _caller_prepare(self) -> bool | None:
        """No server-side prepared statement on a caller's connection through PgBouncer."""
        return False if self.transaction_pooling else None

    def _call(self, conn: psycopg.Connection, statement: str, params: Sequence[Any], *, retry: bool = False) -> Any:
        """The value of a one-value statement (a call to one of the schema's functions), its
        refusals as NotFound / ActionRefused; with ``retry`` (an operator action: a cancel cascading
        to children can meet a child finishing at that instant, which locks in the other order),
        a conflict is tried again as the connection seam's policy says (db/retry.py)."""
        tries = RETRY.attempts(retry=frozenset({Verdict.CONFLICT}) if retry else frozenset())
        while True:
            try:
                cur = conn.execute(render(statement, self.schema), params)
                row = cur.fetchone()
                return row[0] if row else None
            except psycopg.Error as exc:
                again = tries.after(exc)
                if again is None:
                    raise from_database(exc) from None
            time.sleep(again.delay)

    def migrate(self, *, roles: RoleNames | bool | None = None) -> list[int]:
        """Create or upgrade the schema; returns the versions applied now. Safe to run concurrently.

        Also creates (or re-grants) the least-privilege roles ``kestrel_worker`` and
        ``kestrel_operator``: by default when the connected user may create roles; ``roles=False``
        skips them; ``roles=RoleNames(...)`` names them (and fails if they cannot be created).
        """
        return self._migrate_now(roles)

    def _migrate_now(self, roles: RoleNames | bool | None) -> list[int]:
        """``migrate`` on a connection of its own (the migrations are sync code)."""
        with connect(self.dsn, application_name=self.application_name) as conn:
            applied = _migrate.migrate(conn, self.schema)
            if roles is not False and (roles or _roles.can_create_roles(conn)):
                _roles.ensure_roles(conn, self.schema, roles if isinstance(roles, RoleNames) else None)
            return applied

    def prune(
        self, older_than: timedelta, *, by: str | None = None, batch_size: int = _prune.DEFAULT_BATCH_SIZE
    ) -> _prune.PruneResult:
        """Delete executions that finished more than ``older_than`` ago, in short batches (audited)."""
        return _prune.prune(
            self._prune_runner(), self.schema, older_than=older_than, by=by or default_operator(), batch_size=batch_size
        )

    def enqueue(
        self,
        name: str,
        input: Any = None,
        *,
        options: _enqueue.EnqueueOptions | None = None,
        conn: psycopg.Connection | None = None,
        **given: Unpack[_enqueue.EnqueueKeywords],
    ) -> int:
        """Enqueue workflow ``name`` with a JSON ``input``; returns the execution id.

        The enqueue options, as keywords (``EnqueueKeywords``) or as one ``options=``
        ``EnqueueOptions`` value: a repeated ``idempotency_key`` returns the first id and
        inserts nothing. ``delay`` or ``run_at`` postpone the first claim. ``queue`` overrides
        the workflow's queue; ``concurrency_key`` limits how many executions with that key run
        at once (the queue's ``per_key``, default 1). ``priority`` defaults to the queue's.
        Non-JSON input raises NotSerializable, nothing written.

        Concurrent calls are written together, one statement and one commit per batch
        (``enqueue_batch``); each gets its own id or its own error. ``conn``: enqueue inside
        that psycopg connection's transaction instead: the execution exists if and only if it
        commits, and workers are woken at its commit.
        """
        chosen = _enqueue.EnqueueOptions.of(options, **given)
        (row,) = _enqueue.rows(self._registry(), name, [input], chosen, single=True)
        with _roles.needs_worker_role("enqueue"):
            if conn is not None:
                caller = self._caller_connection(conn)
                return self._write(caller, [row], prepare=self._caller_prepare)[0]
            return self._submit(row)

    def enqueue_many(
        self,
        name: str,
        inputs: Sequence[Any],
        *,
        options: _enqueue.EnqueueOptions | None = None,
        conn: psycopg.Connection | None = None,
        **given: Unpack[_enqueue.ChildKeywords],
    ) -> list[int]:
        """Enqueue one execution per input in one statement; ids in input order. The options
        and ``conn`` as for ``enqueue`` (no idempotency key: one key would name every row)."""
        chosen = _enqueue.EnqueueOptions.of(options, _enqueue.ChildKeywords, **given)
        if chosen.idempotency_key is not None:
            raise InvalidArgument("enqueue_many takes no idempotency_key: one key would name every row's execution")
        rows = _enqueue.rows(self._registry(), name, inputs, chosen)
        with _roles.needs_worker_role("enqueue"):
            if conn is not None:
                caller = self._caller_connection(conn)
                return self._write(caller, rows, prepare=self._caller_prepare)
            return self._write_rows(rows)

    def _write(
        self,
        conn: psycopg.Connection,
        rows: Sequence[_enqueue.Row],
        *,
        prepare: bool | None = None,
        notify: bool = True,
    ) -> list[int]:
        """Insert ``rows`` with one statement on ``conn`` (in its transaction, if one is open);
        each row's id, the holder's id for a key already taken. ``notify``: wake workers with
        the transaction's commit (else ``_wake`` after it); ``prepare=False``: no server-side
        prepared statement (PgBouncer in transaction mode)."""
        if not rows:
            return []
        statement = render(_enqueue.ENQUEUE, self.schema)
        cur = conn.execute(statement, _enqueue.params(self.schema, rows, notify=notify), prepare=prepare)
        out, missing = _enqueue.ids(rows, cur.fetchall())
        found: dict[str, int] = {}
        if missing:
            cur = conn.execute(render(_enqueue.SQL.by_keys, self.schema), (missing,), prepare=prepare)
            found = dict(cur.fetchall())
        return _enqueue.complete(rows, out, found)

    def _wake(self, conn: psycopg.Connection, rows: Sequence[_enqueue.Row]) -> None:
        """Wake the workers of ``rows``' workflows (autocommit ``conn``). The rows are committed
        already: a failure here is logged, never raised (a caller told the enqueue failed would
        retry and insert them twice); workers' polling covers a lost wake-up."""
        try:
            conn.execute(render(_enqueue.SQL.wake, self.schema), _enqueue.wake_params(self.schema, rows))
        except psycopg.Error as exc:
            _enqueue.wake_failed(rows, exc)

    def _write_rows(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        """Insert ``rows`` on a pooled connection, then wake their workers."""
        if not rows:
            return []
        return self._creating_ranges(self._insert_rows, rows)

    def _insert_rows(self, rows: Sequence[_enqueue.Row]) -> list[int]:
        with self.connection() as conn:
            ids = self._write(conn, rows, notify=False)
            self._wake(conn, rows)
            return ids

    def _creating_ranges(
        self, write: Callable[[Sequence[_enqueue.Row]], list[int]], rows: Sequence[_enqueue.Row]
    ) -> list[int]:
        """``write(rows)``; if their ids ran past the history's ranges, create the ranges (as
        the workers' upkeep does) and write again. Not for a caller's own transaction: the
        failed insert aborted it."""
        tries = RETRY.attempts(retry=frozenset({Verdict.RANGES_BEHIND}))
        while True:
            try:
                return write(rows)
            except psycopg.Error as exc:
                again = tries.after(exc)
                if again is None:
                    raise
            try:
                with self.connection() as conn:
                    conn.execute(render(_sweeper.SQL.ensure_partitions, self.schema))
            except psycopg.errors.LockNotAvailable:
                pass
            time.sleep(again.delay)

    def send_event(
        self, key: str, payload: Any = None, *, by: str | None = None, conn: psycopg.Connection | None = None
    ) -> int:
        """Send a machine signal: every execution waiting in ``ctx.wait_for_event(key)`` resumes
        with ``payload`` (any JSON value), and later waits for ``key`` find it. Returns its id."""
        value = _events.check_send(key, payload)
        with self._on(conn) as c:
            event_id: int = self._call(c, _events.SQL.send, (key, value, by))
            return event_id

    def get(self, execution_id: int, *, conn: psycopg.Connection | None = None) -> _execution.Execution:
        """The execution's status, input, output, error and timestamps (NotFound if none)."""
        with self._on(conn) as c, c.cursor(row_factory=class_row(_execution.Execution)) as cur:
            cur.execute(render(_execution.SQL.get, self.schema), (execution_id,))
            return _execution.found(cur.fetchone(), execution_id)

    def _act(self, conn: psycopg.Connection | None, statement: str, execution_id: int, *params: Any) -> Any:
        """An operator action (audited, its allowed states checked in the database)."""
        _operator.check_execution_id(execution_id)
        with self._on(conn) as c:
            return self._call(c, statement, (execution_id, *params), retry=True)

    def approve(
        self,
        execution_id: int,
        step_id: str,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> dict[str, Any]:
        """Approve a pending gate and re-enqueue the execution (audited)."""
        decision: dict[str, Any] = self._act(
            conn, _operator.SQL.decide, execution_id, step_id, True, by or default_operator(), comment
        )
        return decision

    def reject(
        self,
        execution_id: int,
        step_id: str,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> dict[str, Any]:
        """Reject a pending gate and re-enqueue the execution (audited)."""
        decision: dict[str, Any] = self._act(
            conn, _operator.SQL.decide, execution_id, step_id, False, by or default_operator(), comment
        )
        return decision

    def cancel(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        """Cancel an enqueued, running, waiting or paused execution; returns its previous status."""
        status: str = self._act(conn, _operator.SQL.cancel, execution_id, by or default_operator(), comment)
        return status

    def requeue(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        """Re-enqueue an errored/cancelled execution or one with an expired lease."""
        status: str = self._act(conn, _operator.SQL.requeue, execution_id, by or default_operator(), comment)
        return status

    def fork(
        self,
        execution_id: int,
        *,
        from_step: str,
        input: Any = _operator.UNSET,
        version: str | None = None,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> int:
        """A new execution from step ``from_step`` of a finished or waiting one: the checkpoints
        before it are kept, it and every step after it run again (``input`` replaces the
        origin's; ``version``: only workers of that code version run it). Audited, linked to its
        origin; returns the new id."""
        _operator.check_execution_id(execution_id)
        params = _operator.fork_params(execution_id, from_step, input, version, by or default_operator(), comment)
        new_id: int = self._act(conn, _operator.SQL.fork, *params)
        return new_id

    def pause(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        """Hold one enqueued, running or waiting execution (audited): nothing runs it until it
        is resumed; a running one stops at its next step boundary, its waits keep their
        deadlines. Returns its previous status."""
        status: str = self._act(conn, _operator.SQL.pause, execution_id, by or default_operator(), comment)
        return status

    def resume(
        self,
        execution_id: int,
        *,
        by: str | None = None,
        comment: str | None = None,
        conn: psycopg.Connection | None = None,
    ) -> str:
        """Let a paused execution go on from its checkpoints (audited); returns the status it
        went to: 'waiting' while one of its waits is still open, 'running' when the claim it
        was paused under still runs it (a step in flight: that claim goes on), else 'enqueued'."""
        status: str = self._act(conn, _operator.SQL.resume, execution_id, by or default_operator(), comment)
        return status

    def pause_queue(self, name: str, *, by: str | None = None, comment: str | None = None) -> None:
        """Stop claiming from queue ``name`` (running executions finish); audited."""
        with self.connection() as c:
            self._call(c, _queues.SQL.set_paused, (name, True, by or default_operator(), comment))

    def resume_queue(self, name: str, *, by: str | None = None, comment: str | None = None) -> None:
        """Claim from a paused queue again; audited."""
        with self.connection() as c:
            self._call(c, _queues.SQL.set_paused, (name, False, by or default_operator(), comment))

    def add_schedule(
        self,
        name: str,
        cron: str,
        workflow: str,
        *,
        input: dict[str, Any] | None = None,
        timezone: str = "UTC",
        catch_up: bool = False,
        by: str | None = None,
        comment: str | None = None,
    ) -> datetime:
        """Add a schedule (audited; any worker ticks it); returns its first tick. InvalidArgument
        for a bad cron, timezone or input; ActionRefused if the name is taken, or if this login
        may not enqueue: a schedule enqueues its workflow at every tick, so adding one needs the
        worker role (the operator role pauses, resumes and removes schedules)."""
        with self.connection() as c:
            with _roles.needs_worker_role("add a schedule"):
                expression, input_json = _schedules.check(name, cron, workflow, timezone, input)
                first = _cron.next_after(expression, timezone, self._call(c, _schedules.SQL.now, ()))
                by = by or default_operator()
                params = (name, expression, timezone, workflow, input_json, catch_up, first, by, comment)
                tick: datetime = self._call(c, _schedules.SQL.add, params)
                return tick

    def pause_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> None:
        """Stop a schedule's ticks until it is resumed (audited)."""
        with self.connection() as c:
            self._call(c, _schedules.SQL.set_paused, (name, True, None, by or default_operator(), comment))

    def resume_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> datetime:
        """Tick again from the first tick after now (none of the paused ticks); returns it (audited)."""
        with self.connection() as c:
            cur = c.execute(render(_schedules.SQL.cron_of, self.schema), (name,))
            found = cur.fetchone()
            next_tick = None
            if found is not None:
                next_tick = _schedules.resumed_tick(name, found[0], found[1], self._call(c, _schedules.SQL.now, ()))
            params = (name, False, next_tick, by or default_operator(), comment)
            resumed_at: datetime = self._call(c, _schedules.SQL.set_paused, params)
            return resumed_at

    def trigger_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> int:
        """Run a schedule once, now: its workflow enqueued with the input a tick gives (audited);
        its ticks are left alone and a paused one stays paused. Returns the new execution's id."""
        with self.connection() as c:
            execution_id: int = self._call(c, _schedules.SQL.trigger, (name, by or default_operator(), comment))
            return execution_id

    def remove_schedule(self, name: str, *, by: str | None = None, comment: str | None = None) -> str:
        """Delete a schedule (audited); returns its source: 'code' ones come back when a worker
        that declares them starts (pause those instead)."""
        with self.connection() as c:
            source: str = self._call(c, _schedules.SQL.remove, (name, by or default_operator(), comment))
            return source
