"""JSON checks: inputs and step outputs must be plain JSON values, refused before any write."""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import Jsonb

from kestrel_core.base.errors import NotSerializable, TooLarge

# The largest JSON value stored (an input, a step or workflow output, approval details), as
# UTF-8. Well under what Postgres refuses (jsonb ~256 MB, 1 GB per field and per protocol
# message): past this a value is checked here, before anything is sent, and refused whole.
MAX_JSON_BYTES = 64 * 1024 * 1024


def megabytes(n: int) -> str:
    """'300.0 MB' (MiB, as the limit is written)."""
    return f"{n / (1024 * 1024):.1f} MB"


# Below this many bits an integer has fewer than 4,300 digits, which Python converts to text.
_INT_BITS_CHECKED = 14_000


def _first_bad(value: Any, path: str = "$", depth: int = 0) -> tuple[str, str] | None:
    """Where the first non-JSON value sits in ``value`` and what it is, or None."""
    if depth > 500:
        return path, "a structure nested more than 500 levels deep"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _INT_BITS_CHECKED:
        try:
            str(value)
        except ValueError:
            return path, "an integer of more than 4,300 digits (Python's limit for converting one to text)"
        return None
    if value is None or isinstance(value, (bool, str, int)):
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return path, f"the float {value!r} (JSON has no NaN or Infinity)"
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            bad = _first_bad(item, f"{path}[{i}]", depth + 1)
            if bad:
                return bad
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}", f"a dict key of type {type(key).__name__} ({key!r}); JSON keys are strings"
            bad = _first_bad(item, f"{path}.{key}", depth + 1)
            if bad:
                return bad
        return None
    return path, f"a value of type {type(value).__name__}"


def to_json(value: Any, what: str) -> Jsonb:
    """Wrap ``value`` for a jsonb parameter, or raise NotSerializable naming ``what`` and the type.

    ``what`` reads like "the input of workflow 'remediate'" or "step 'fix' of execution 7".
    """
    bad = _first_bad(value)
    if bad is not None:
        path, description = bad
        where = "" if path == "$" else f" at {path}"
        raise NotSerializable(f"{what} is not JSON-serializable: {description}{where}")
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    if "\\u0000" in text:
        raise NotSerializable(
            f"{what} is not storable: it contains a NUL character (\\u0000), which Postgres jsonb refuses"
        )
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotSerializable(
            f"{what} is not storable: it contains a lone surrogate ({text[exc.start]!r}), which is not "
            "valid Unicode (write the character itself, or a surrogate pair)"
        ) from None
    if len(data) > MAX_JSON_BYTES:
        raise TooLarge(
            f"{what} is too large ({megabytes(len(data))}; the limit is "
            f"{megabytes(MAX_JSON_BYTES)}): store big data elsewhere and pass a reference"
        )
    return Jsonb(value, dumps=lambda _v: data)


def as_stored(value: Jsonb | None) -> Any:
    """The value of a jsonb parameter as Postgres will hand it back on a replay: JSON types
    only (tuples become lists) and object keys in jsonb's order (shorter first, then by bytes).

    A checkpoint's output is returned to the workflow in this form on its first run too, so a
    workflow sees the same value (and the same key order) on every run.
    """
    return None if value is None else _jsonb_form(value.obj)


def _jsonb_form(value: Any) -> Any:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode("utf-8")), k.encode("utf-8")))
        return {k: _jsonb_form(value[k]) for k in keys}
    if isinstance(value, (list, tuple)):
        return [_jsonb_form(v) for v in value]
    return value
