"""Idempotency keys and queue names users give, checked before anything reaches Postgres.

The engine keys its own executions too: a schedule's tick (``schedule:NAME:TICK``) and a
child (``child:PARENT:STEP``), so that each is enqueued once. Those keys live in their own
column, ``engine_key`` (migration 0013), and users' keys in ``idempotency_key``, which refuses
the engine's prefixes (a CHECK constraint naming the same list): a user key can never take the
place of a tick or a child. ``check_idempotency_key`` refuses them at the API, with the reason.

Keys and names are bounded: an over-long one would fail in a btree index (its entries hold at
most about 2,700 bytes), a permanent error that must not look like an unreachable database.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kestrel_core.base.errors import InvalidArgument

RESERVED_PREFIXES = ("schedule:", "child:")  # keep in step with migration 0013's CHECK
MAX_KEY_LENGTH = 500  # characters: at most 2,000 bytes of UTF-8, under the btree entry limit


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string, not {value!r}")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidArgument(f"{what} is too long ({len(value)} characters; the limit is {MAX_KEY_LENGTH})")
    if "\x00" in value:
        raise InvalidArgument(f"{what} cannot contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} is not valid Unicode text (it holds a lone surrogate)") from None
    return value


def check_idempotency_key(key: object) -> str | None:
    """``key`` if a user may give it (None: no key); else InvalidArgument saying why: not a
    string, too long, or in the engine's namespace (a reserved prefix, named)."""
    if key is None:
        return None
    key = _check_text(key, "an idempotency key")
    for prefix in RESERVED_PREFIXES:
        if key.startswith(prefix):
            raise InvalidArgument(
                f"idempotency key {key[:60]!r} starts with {prefix!r}, a prefix reserved for the "
                f"engine's own keys ({', '.join(RESERVED_PREFIXES)}): choose a key without it"
            )
    return key


def check_name(name: object, what: str = "a queue name") -> str | None:
    """A queue name or concurrency key (None: not given) if it is storable and bounded, else
    InvalidArgument."""
    return None if name is None else _check_text(name, what)


def child_key(parent_id: int, step_id: str) -> str:
    """The engine key of the child a parent starts at ``step_id``: one child per start, ever."""
    return f"child:{parent_id}:{step_id}"


def tick_key(schedule: str, tick: datetime) -> str:
    """The engine key of a schedule's tick: one execution per (schedule, tick), ever."""
    return f"schedule:{schedule}:{tick.astimezone(UTC).isoformat()}"
