"""Exceptions raised by kestrel_core.

Each says what is wrong and what to do; the CLI prints ``str(exc)`` and exits 1.
"""

from __future__ import annotations

import psycopg


class KestrelError(Exception):
    """Base class of every error Kestrel raises on purpose."""


class NotFound(KestrelError):
    """The execution, approval gate or report asked for does not exist."""


class ActionRefused(KestrelError):
    """The execution's current state does not allow the action; nothing was changed."""


class NotSerializable(KestrelError, TypeError):
    """A workflow input or a step output is not a JSON value."""


class InvalidArgument(KestrelError, ValueError):
    """A value the API cannot take (an empty or over-long workflow name, a priority, delay or
    execution id out of range); nothing was written. The CLI exits 2 (bad usage)."""


class TooLarge(NotSerializable, ValueError):
    """A JSON value (input, step output, approval details) over ``MAX_JSON_BYTES``."""


class DuplicateStepId(KestrelError):
    """Two steps (or waits) of one execution used the same id."""


class SchemaOutdated(KestrelError):
    """The database schema is missing or older than this code: run ``migrate``."""


class SchemaTooNew(SchemaOutdated):
    """The database schema was migrated by a newer Kestrel than this code: upgrade kestrel.

    A kind of SchemaOutdated (the schema does not fit this code), so every place that refuses
    an unusable schema refuses this one too, with its own message."""


class DatabaseUnavailable(KestrelError):
    """Postgres could not be reached (wrong DSN, server down, auth refused)."""


class StepFailed(KestrelError):
    """A step raised on every attempt; raised into the workflow at the step call."""

    def __init__(self, step_id: str, attempts: int, error: str) -> None:
        self.step_id, self.attempts, self.error = step_id, attempts, error
        times = "once" if attempts == 1 else f"{attempts} times"
        super().__init__(f"step {step_id!r} failed {times}: {error}")


class ChildFailed(KestrelError):
    """A child workflow ended in error or was cancelled (or was not done within the wait's
    timeout); raised into the parent at ``ctx.wait_for``."""

    def __init__(
        self, child_id: int, workflow_name: str, status: str, error: str | None, timed_out: bool = False
    ) -> None:
        self.child_id, self.workflow_name, self.status = child_id, workflow_name, status
        self.error, self.timed_out = error, timed_out
        first = (error or "").split("\n", 1)[0]
        if timed_out:
            text = f"child execution {child_id} ({workflow_name!r}) did not finish in time (it is {status})"
        else:
            text = f"child execution {child_id} ({workflow_name!r}) ended {status}" + (f": {first}" if first else "")
        super().__init__(text)


class UnauditedDecision(KestrelError):
    """An approval gate's checkpoint that no recorded decision backs (written outside
    ``decide_approval``): the replay refuses it and the execution ends as error."""


class NonDeterministicChange(KestrelError):
    """A replay met a durable operation other than the one recorded at that position: the
    workflow's code changed while the execution was in flight. The execution ends as error."""


def from_database(exc: psycopg.Error) -> psycopg.Error | KestrelError:
    """Turn a refusal raised by the operator functions (SQLSTATE KS404/KS409) into ours."""
    diag = getattr(exc, "diag", None)
    message = diag.message_primary if diag is not None and diag.message_primary else str(exc)
    hint = diag.message_hint if diag is not None else None
    if hint:
        message = f"{message}\n{hint}"
    if exc.sqlstate == "KS404":
        return NotFound(message)
    if exc.sqlstate == "KS409":
        return ActionRefused(message)
    return exc
