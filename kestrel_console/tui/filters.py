"""The executions filter typed after ``/``: ``status:error workflow:remediate free text``.

``workflow:`` takes a prefix of the name, case-sensitive (``workflow:remediate`` finds
remediate-incident; the reader matches it, see ``kestrel_console.read.workflow_match``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from kestrel_core import STATUSES

KEYS = {"status": "status", "s": "status", "workflow": "workflow", "wf": "workflow", "w": "workflow"}


@dataclass(frozen=True)
class ExecutionFilter:
    status: str | None = None
    workflow: str | None = None
    text: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.status:
            parts.append(f"status:{self.status}")
        if self.workflow:
            parts.append(f"workflow:{shlex.quote(self.workflow)}")
        if self.text:
            parts.append(self.text)
        return " ".join(parts)

    @property
    def empty(self) -> bool:
        return not (self.status or self.workflow or self.text)


def parse_filter(text: str) -> ExecutionFilter:
    """Parse the filter line; ``status:`` must name a real status (ValueError says which exist).

    ``workflow:`` is a prefix of the workflow name. Words without a known ``key:`` prefix are
    joined into the free text, which matches the
    workflow name, the owner, the error, or the id exactly.
    """
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: take the words as typed
        words = text.split()
    status = workflow = None
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
        else:
            workflow = value or None
    return ExecutionFilter(status=status, workflow=workflow, text=" ".join(free) or None)
