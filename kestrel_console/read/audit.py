"""The audit trail: every operator action (``operator_actions``), newest first, filtered.

The filter is a short language of its own, in the spirit of the executions filter
(``read.search``): ``action:cancel by:alice id:42 since:2h`` and free text matched in the
comment, the name given, the step and the database role. Pages go back by id, so a page
deep in a long trail costs what the first one does.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass
from typing import Any

from kestrel_core.db import statements_beside

from .search import MAX_ID, span_seconds
from .session import ReaderSession

SQL = statements_beside(__file__)


AUDIT_KEYS = ("action:", "by:", "id:", "since:")
_WORD = re.compile(r"[a-z_]+")


class AuditFilterError(ValueError):
    """A filter the audit trail cannot read; the message says which part and what is expected."""


@dataclass(frozen=True)
class AuditFilter:
    """What an operator asked to see of the audit trail."""

    action: str | None = None
    actor: str | None = None
    execution_id: int | None = None
    since_s: float | None = None
    text: str | None = None

    def params(self) -> dict[str, Any]:
        """The query's parameters: every field, by its name (audit.sql names them so)."""
        return asdict(self)

    def __str__(self) -> str:
        parts = []
        if self.action:
            parts.append(f"action:{self.action}")
        if self.actor:
            parts.append(f"by:{_quoted(self.actor)}")
        if self.execution_id is not None:
            parts.append(f"id:{self.execution_id}")
        if self.since_s is not None:
            parts.append(f"since:{self.since_s:g}s")
        if self.text:
            parts.append(_quoted(self.text))
        return " ".join(parts)


def _quoted(text: str) -> str:
    return shlex.quote(text) if any(c.isspace() or c in "'\"" for c in text) or ":" in text else text


def parse_audit_filter(text: str) -> AuditFilter:
    """``action:cancel by:alice id:42 since:2h free words`` → an AuditFilter (quotes group
    words: ``by:'Ann Lee'``). Raises AuditFilterError naming the part it could not read."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise AuditFilterError(f"cannot read the filter ({exc}): close the quote") from None
    found: dict[str, Any] = {}
    free: list[str] = []
    for word in words:
        key, sep, value = word.partition(":")
        key = key.lower()
        if not sep or f"{key}:" not in AUDIT_KEYS:
            free.append(word)
            continue
        if not value:
            raise AuditFilterError(f"{key}: needs a value, e.g. {_example(key)}")
        if key in found:
            raise AuditFilterError(f"{key}: given twice: give it once")
        if key == "action":
            if not _WORD.fullmatch(value.lower()):
                raise AuditFilterError(f"action:{value} is not an action name, e.g. action:cancel")
            found[key] = value.lower()
        elif key == "id":
            if not value.isdigit() or not 0 < int(value) <= MAX_ID:
                raise AuditFilterError(f"id:{value} is not an execution id, e.g. id:42")
            found[key] = int(value)
        elif key == "since":
            try:
                found[key] = span_seconds(value)
            except ValueError as exc:
                raise AuditFilterError(str(exc)) from None
        else:
            found[key] = value
    return AuditFilter(
        action=found.get("action"),
        actor=found.get("by"),
        execution_id=found.get("id"),
        since_s=found.get("since"),
        text=" ".join(free) or None,
    )


def _example(key: str) -> str:
    return {"action": "action:cancel", "by": "by:alice", "id": "id:42", "since": "since:2h"}[key]


class AuditReads(ReaderSession):
    """The audit trail, a page at a time."""

    def audit(
        self, where: AuditFilter | None = None, *, limit: int = 100, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Operator actions matching ``where``, newest first; ``before_id`` pages back (the
        smallest id of the page before)."""
        params = {**(where or AuditFilter()).params(), "limit": limit, "before_id": before_id or MAX_ID}
        return self._rows("audit", SQL.audit, params)
