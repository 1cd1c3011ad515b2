"""Several statements in one round trip, sent through the connection's libpq handle.

For the one hot path where psycopg's own machinery costs more than the work: a batch of the
enqueue group commit (BEGIN, ENQUEUE, COMMIT, WAKE). Through ``Connection.pipeline()`` each
statement went through a cursor (placeholders converted, a result object per statement, the
pipeline's queue): 230-270 us of client CPU a batch of 8 rows, during which the writer holds
the GIL its 8 waiting callers need next. Here the statements are prepared once per connection
(in the first batch's round trip), their parameters dumped by psycopg's own adapters
(``Transformer``) and sent through ``conn.pgconn`` (``psycopg.pq``, psycopg's documented libpq
wrapper): ~100 us, and 8 threads enqueue 5-12 % more a second (bench/README.md, "Ingestion").

Statements keep their named placeholders (``%(name)s``, ``%(name)b`` for binary): ``Prepared``
numbers them once. Types come from the statement's casts, as for any prepared statement.
"""

from __future__ import annotations

import hashlib
import re
import select
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.abc import Buffer
from psycopg.adapt import PyFormat, Transformer
from psycopg.errors import error_from_result
from psycopg.pq import DiagnosticField
from psycopg.pq.abc import PGconn, PGresult

_PLACEHOLDER = re.compile(r"%\((\w+)\)([sb])")
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name

# The statements each open connection has prepared (names): a new connection prepares again.
_prepared_on: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[bytes]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Prepared:
    """A statement as the protocol takes it: ``$n`` placeholders, named after its text."""

    name: bytes
    query: bytes
    params: tuple[str, ...]  # the named parameter of each $n
    formats: tuple[PyFormat, ...]

    @classmethod
    def of(cls, statement: sql.Composable) -> Prepared:
        """``statement`` (rendered, ``%(name)s`` placeholders) numbered; a name appearing twice
        is one parameter."""
        text = statement.as_string(None)
        names: list[str] = []
        formats: list[PyFormat] = []

        def number(match: re.Match[str]) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
                # Text unless the statement asks for binary: the statement is prepared without
                # types (the server infers them from its casts), and psycopg's automatic choice
                # sends binary of its own type (7 as an int2 where the statement says ::int).
                formats.append(PyFormat.BINARY if match.group(2) == "b" else PyFormat.TEXT)
            return f"${names.index(match.group(1)) + 1}"

        query = _PLACEHOLDER.sub(number, text).encode()
        name = b"kestrel_" + hashlib.sha1(query, usedforsecurity=False).hexdigest()[:20].encode()
        return cls(name, query, tuple(names), tuple(formats))


@dataclass(frozen=True)
class Step:
    """One statement of a round trip: literal SQL without parameters (BEGIN, COMMIT), or a
    prepared statement and its parameters by name."""

    literal: bytes | None = None
    prepared: Prepared | None = None
    params: Mapping[str, Any] | None = None


def round_trip(conn: psycopg.Connection[Any], steps: Sequence[Step]) -> list[PGresult]:
    """Send ``steps`` in one pipeline and one sync; each step's result, in order (a step after
    a failed one comes back PIPELINE_ABORTED). Raises only what a lost connection raises; the
    caller reads each result's status. ``conn`` must be idle and not in a pipeline of its own;
    psycopg's automatic preparing is turned off on it (round trips prepare their statements)."""
    with conn.lock:
        # psycopg's own preparing would empty the session's prepared statements, ours too, at
        # its next rollback (DEALLOCATE ALL, once it has prepared any of its own).
        conn.prepare_threshold = None
        pgconn = conn.pgconn
        tx = Transformer(conn)
        prepared = _prepared_on.setdefault(conn, set())
        preparing = list(
            dict.fromkeys(s.prepared for s in steps if s.prepared is not None and s.prepared.name not in prepared)
        )
        sends: list[tuple[bytes, Sequence[Buffer | None] | None, Sequence[pq.Format] | None]] = []
        for step in steps:  # dumped first: nothing is sent unless every parameter dumps
            if step.prepared is None:
                sends.append((step.literal or b"", None, None))
                continue
            values = [(step.params or {})[name] for name in step.prepared.params]
            sends.append((step.prepared.name, tx.dump_sequence(values, step.prepared.formats), tx.formats))
        pgconn.enter_pipeline_mode()
        try:
            for statement in preparing:
                pgconn.send_prepare(statement.name, statement.query)
            for step, (command, dumped, formats) in zip(steps, sends):
                if step.prepared is None:
                    pgconn.send_query_params(command, None)
                else:
                    pgconn.send_query_prepared(command, dumped, param_formats=formats)
            pgconn.pipeline_sync()
            results = _results(pgconn)
        except BaseException:
            conn.close()  # lost, or left with results unread: its owner connects again
            raise
        pgconn.exit_pipeline_mode()
        for statement, result in zip(preparing, results):
            if result.status == pq.ExecStatus.COMMAND_OK:
                prepared.add(statement.name)
        if any(r.error_field(DiagnosticField.SQLSTATE) == _NO_SUCH_STATEMENT for r in results):
            prepared.clear()  # deallocated behind our back (DEALLOCATE ALL, DISCARD ALL): again next time
        return results[len(preparing) :]


def failure(conn: psycopg.Connection[Any], result: PGresult, expected: pq.ExecStatus) -> psycopg.Error | None:
    """The error ``result`` carries, None if it has the ``expected`` status."""
    if result.status == expected:
        return None
    if result.status == pq.ExecStatus.PIPELINE_ABORTED:
        return psycopg.errors.PipelineAborted("an earlier statement of the round trip failed")
    return error_from_result(result, encoding=conn.info.encoding)


def rows_of(conn: psycopg.Connection[Any], result: PGresult) -> list[tuple[Any, ...]]:
    """``result``'s rows, loaded by the connection's adapters."""
    tx = Transformer(conn)
    tx.set_pgresult(result)
    return tx.load_rows(0, result.ntuples, tuple)


def _results(pgconn: PGconn) -> list[PGresult]:
    """Flush what was sent and read every result up to the pipeline's sync. Input is read while
    output is still pending, so neither side can wait on a full socket buffer. Waits through
    ``poll``: no descriptor limit (select() refuses one over 1023), and no epoll descriptor
    made and closed at every round trip as a selector does (6.5 us against 0.6 on a fast day,
    27-30 against 2 on a slow one; bench/README.md, "Ingestion")."""
    out: list[PGresult] = []
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN | select.POLLOUT)
    while pgconn.flush():
        poller.poll()
        pgconn.consume_input()
    poller.modify(pgconn.socket, select.POLLIN)
    ended = False
    while True:
        while pgconn.is_busy():
            poller.poll()
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:  # the end of one statement's results; twice: nothing more will come
            if ended:
                raise psycopg.OperationalError("the connection ended before the round trip's results")
            ended = True
            continue
        ended = False
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            return out
        out.append(result)


def readable(fileno: int) -> bool:
    """Whether ``fileno`` has something to read now (``poll``, for the reasons in ``_results``)."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN)
    return bool(poller.poll(0))
