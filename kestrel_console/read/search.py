"""The executions filter language, one grammar for the TUI's ``/`` and the CLI's ``list --where``:
``status:error workflow:remediate since:2h input.pod=api-1 free text``.

Keys (each word; quote a value with spaces: ``from:"2026-12-06 14:30"``):

- ``status:S`` (``s:``) one status;
- ``workflow:W`` (``wf:``, ``w:``) a case-sensitive prefix of the workflow name,
  ``workflow:=W`` the whole name (what a dashboard count opens);
- ``id:N`` one execution; ``key:K`` the execution enqueued with idempotency key ``K``;
- ``input.FIELD=VALUE`` (``input.order.id=7`` for nested fields): the input holds that value
  there (as text, or as the number/true/false/null it spells, or in an array there), served by
  the input's GIN index (migration 0025);
- ``since:2h`` created in the last span; ``from:T`` / ``until:T`` created at or after / before
  ``T``, a date or time (``2026-12-06``, ``"2026-12-06 14:30"``, ``14:30`` today, with an
  optional ``+02:00``/``Z``; else the console's local time zone) or a span ago (``3d``);
- any other word is free text: the workflow name, owner, error, input text, step, gate and
  sleep ids, or the id exactly, matched in the newest ``TEXT_WINDOW`` executions that the
  keys select (no index can serve a substring of every input: see docs/console.md).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time

from kestrel_core import STATUSES

KEYS = {
    "status": "status",
    "s": "status",
    "workflow": "workflow",
    "wf": "workflow",
    "w": "workflow",
    "since": "since",
    "from": "from",
    "until": "until",
    "id": "id",
    "key": "key",
}
INPUT_PREFIX = "input."
# Free text looks at this many executions (the newest the keys select, before the page).
TEXT_WINDOW = 2_000
_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_CLOCK = re.compile(r"\d{1,2}:\d{2}(:\d{2})?")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_ID = 2**63 - 1


def span_seconds(text: str, key: str = "since") -> float:
    """``90s``, ``30m``, ``2h``, ``7d`` in seconds (ValueError says how to write it)."""
    match = _SPAN.fullmatch(text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{key}:{text}: write the span as 90s, 30m, 2h or 7d")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass(frozen=True)
class Moment:
    """A bound of the time window: a span ago (seconds, measured on the database's clock) or
    a point in time (timezone-aware)."""

    ago_s: float | None = None
    at: datetime | None = None


def parse_moment(text: str, key: str) -> Moment:
    """``2h`` (ago), ``2026-12-06``, ``2026-12-06 14:30[:00][+02:00|Z]``, ``14:30`` (today)."""
    value = text.strip()
    if _SPAN.fullmatch(value.lower()):
        return Moment(ago_s=span_seconds(value, key))
    try:
        if _CLOCK.fullmatch(value):
            at = datetime.combine(date.today(), time.fromisoformat(value.rjust(len(value) + 2 - value.index(":"), "0")))
        else:
            at = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f'{key}:{text}: write a time as 2026-12-06, "2026-12-06 14:30", 14:30 (today) or a span ago as 2h'
        ) from None
    return Moment(at=at if at.tzinfo else at.astimezone())


@dataclass(frozen=True)
class InputMatch:
    """``input.a.b=v``: the input holds ``v`` at ``a.b``."""

    path: tuple[str, ...]
    value: str

    def documents(self) -> list[str]:
        """The JSON documents the input must contain (``@>``), any one of them: the value as
        text, as the JSON scalar it spells (``7``, ``true``), and each inside an array."""
        values: list[object] = [self.value]
        try:
            scalar = json.loads(self.value)
        except ValueError:
            scalar = None
        else:
            if not isinstance(scalar, (dict, list, str)):
                values.append(scalar)
        docs = []
        for v in values:
            for leaf in (v, [v]):
                doc: object = leaf
                for name in reversed(self.path):
                    doc = {name: doc}
                docs.append(json.dumps(doc))
        return docs

    def __str__(self) -> str:
        return f"{INPUT_PREFIX}{'.'.join(self.path)}={shlex.quote(self.value) if self.value else chr(39) * 2}"


@dataclass(frozen=True)
class ExecutionFilter:
    status: str | None = None
    workflow: str | None = None
    text: str | None = None
    since: str | None = None  # as typed (2h); since_s in seconds
    exact: bool = False  # workflow is the whole name, not a prefix
    id: int | None = None
    key: str | None = None
    inputs: tuple[InputMatch, ...] = field(default=())
    start: str | None = None  # from:, as typed
    end: str | None = None  # until:, as typed

    @property
    def since_s(self) -> float | None:
        return span_seconds(self.since) if self.since else None

    @property
    def start_moment(self) -> Moment | None:
        return parse_moment(self.start, "from") if self.start else None

    @property
    def end_moment(self) -> Moment | None:
        return parse_moment(self.end, "until") if self.end else None

    @property
    def windowed(self) -> bool:
        """A time window is set (the reader first turns it into a range of ids)."""
        return bool(self.since or self.start or self.end)

    def __str__(self) -> str:
        parts = []
        if self.id is not None:
            parts.append(f"id:{self.id}")
        if self.key is not None:
            parts.append(f"key:{shlex.quote(self.key)}")
        if self.status:
            parts.append(f"status:{self.status}")
        if self.workflow:
            parts.append(f"workflow:{'=' if self.exact else ''}{shlex.quote(self.workflow)}")
        parts += [str(m) for m in self.inputs]
        if self.since:
            parts.append(f"since:{self.since}")
        if self.start:
            parts.append(f"from:{shlex.quote(self.start)}")
        if self.end:
            parts.append(f"until:{shlex.quote(self.end)}")
        if self.text:
            parts.append(self.text)
        return " ".join(parts)

    def describe(self) -> str:
        """The filter as shown above a list, with the bound of its free text, if any."""
        if self.empty:
            return "all executions"
        if self.text:
            return f"{self} (free text: the newest {TEXT_WINDOW:,} executions the keys select; add until: to go older)"
        return str(self)

    @property
    def empty(self) -> bool:
        return not (
            self.status
            or self.workflow
            or self.text
            or self.since
            or self.id is not None
            or self.key is not None
            or self.inputs
            or self.start
            or self.end
        )

    def merged(self, **keys: object) -> ExecutionFilter:
        """This filter with more keys (the CLI's ``--status`` beside ``--where``)."""
        return replace(self, **keys)  # type: ignore[arg-type]


def parse_filter(text: str) -> ExecutionFilter:
    """Parse the filter line (module docstring); ValueError says what is wrong and how to write
    it: an unknown status, a span, a time, an id that is not a number, an empty input field."""
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: take the words as typed
        words = text.split()
    found: dict[str, object] = {}
    exact = False
    inputs: list[InputMatch] = []
    free: list[str] = []
    for word in words:
        if word.lower().startswith(INPUT_PREFIX) and "=" in word:
            name, _, value = word[len(INPUT_PREFIX) :].partition("=")
            path = tuple(name.split("."))
            if not all(path):
                raise ValueError(f"{word}: name the field, as in input.pod=api-1 or input.order.id=7")
            inputs.append(InputMatch(path, value))
            continue
        key, sep, value = word.partition(":")
        kind = KEYS.get(key.lower()) if sep else None
        if kind is None:
            free.append(word)
        elif kind == "status":
            value = value.lower()
            if value not in STATUSES:
                raise ValueError(f"unknown status {value!r}: use one of {', '.join(STATUSES)}")
            found["status"] = value
        elif kind == "since":
            span_seconds(value)  # refused here, with how to write it
            found["since"] = value.lower()
        elif kind in ("from", "until"):
            parse_moment(value, kind)
            found["start" if kind == "from" else "end"] = value
        elif kind == "id":
            digits = value.strip().lstrip("#")
            if not digits.isdigit() or not 0 < int(digits) <= MAX_ID:
                raise ValueError(f"id:{value}: an execution id is a positive number, as in id:1234")
            found["id"] = int(digits)
        elif kind == "key":
            if not value:
                raise ValueError("key: name the idempotency key, as in key:order-1234")
            found["key"] = value
        else:
            exact = value.startswith("=")
            found["workflow"] = value.removeprefix("=") or None
    return ExecutionFilter(
        text=" ".join(free) or None,
        exact=exact and bool(found.get("workflow")),
        inputs=tuple(inputs),
        **found,  # type: ignore[arg-type]
    )
