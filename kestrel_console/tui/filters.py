"""The executions filter typed after ``/``: ``status:error workflow:remediate since:2h free text``.

``since:`` keeps the executions created in that last span (``90s``, ``30m``, ``2h``, ``7d``).

``workflow:`` takes a prefix of the name, case-sensitive (``workflow:remediate`` finds
remediate-incident; the reader matches it, see ``kestrel_console.read.workflow_match``);
``workflow:=remediate`` the whole name (what a dashboard count opens).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from kestrel_core import STATUSES

KEYS = {"status": "status", "s": "status", "workflow": "workflow", "wf": "workflow", "w": "workflow", "since": "since"}
_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def span_seconds(text: str) -> float:
    """``90s``, ``30m``, ``2h``, ``7d`` in seconds (ValueError says how to write it)."""
    match = _SPAN.fullmatch(text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"since:{text}: write the span as 90s, 30m, 2h or 7d")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass(frozen=True)
class ExecutionFilter:
    status: str | None = None
    workflow: str | None = None
    text: str | None = None
    since: str | None = None  # as typed (2h); since_s in seconds
    exact: bool = False  # workflow is the whole name, not a prefix

    @property
    def since_s(self) -> float | None:
        return span_seconds(self.since) if self.since else None

    def __str__(self) -> str:
        parts = []
        if self.status:
            parts.append(f"status:{self.status}")
        if self.workflow:
            parts.append(f"workflow:{'=' if self.exact else ''}{shlex.quote(self.workflow)}")
        if self.since:
            parts.append(f"since:{self.since}")
        if self.text:
            parts.append(self.text)
        return " ".join(parts)

    @property
    def empty(self) -> bool:
        return not (self.status or self.workflow or self.text or self.since)


def parse_filter(text: str) -> ExecutionFilter:
    """Parse the filter line; ``status:`` must name a real status (ValueError says which exist).

    ``workflow:`` is a prefix of the workflow name. Words without a known ``key:`` prefix are
    joined into the free text, which matches the workflow name, the owner, the error, the
    input, the ids of its steps, gates and sleeps, or the id exactly. ``since:`` is a span
    (``2h``).
    """
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: take the words as typed
        words = text.split()
    status = workflow = since = None
    exact = False
    free: list[str] = []
    for word in words:
        key, sep, value = word.partition(":")
        field = KEYS.get(key.lower()) if sep else None
        if field is None:
            free.append(word)
        elif field == "status":
            value = value.lower()
            if value not in STATUSES:
                raise ValueError(f"unknown status {value!r}: use one of {', '.join(STATUSES)}")
            status = value
        elif field == "since":
            span_seconds(value)  # refused here, with how to write it
            since = value.lower()
        else:
            exact = value.startswith("=")
            workflow = value.removeprefix("=") or None
    return ExecutionFilter(
        status=status, workflow=workflow, text=" ".join(free) or None, since=since, exact=exact and bool(workflow)
    )
