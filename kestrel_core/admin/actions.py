"""Operator actions: approve, reject, cancel, requeue, fork, pause, resume.

Each is one call to a SECURITY DEFINER function of the schema (migration 0002), which checks
the allowed states, writes the audit row and applies the change in one transaction. A refusal
changes nothing and surfaces as NotFound or ActionRefused.
"""

from __future__ import annotations

from typing import Any

from kestrel_core.base.errors import InvalidArgument
from kestrel_core.base.serialization import to_json
from kestrel_core.db.sql_files import statements_beside

SQL = statements_beside(__file__)


class _Unset:
    """The type of ``UNSET``: a fork without new input (None is the JSON value null)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


BIGINT_MAX = 2**63 - 1


def check_execution_id(execution_id: object) -> int:
    """``execution_id`` if it can be an execution id (a positive 64-bit integer), else
    InvalidArgument: an id past bigint would reach Postgres as numeric and match no function."""
    if not isinstance(execution_id, int) or isinstance(execution_id, bool) or not 1 <= execution_id <= BIGINT_MAX:
        raise InvalidArgument(f"no execution can have id {execution_id!r}: ids are integers from 1 to {BIGINT_MAX}")
    return execution_id


def fork_params(
    execution_id: int, from_step: str, input: Any, version: str | None, by: str, comment: str | None
) -> tuple[Any, ...]:
    if not isinstance(from_step, str) or not from_step:
        raise InvalidArgument("fork needs the id of the step to run again from (from_step)")
    given = input is not UNSET
    payload = to_json(input, f"the input of the fork of execution {execution_id}") if given else None
    return (execution_id, from_step, payload, given, version, by, comment)
