"""The Approvals filter typed after ``/``: words that must all match a pending gate.

``risk:high`` matches a gate whose details carry ``risk`` containing ``high``; ``workflow:x``
and ``gate:x`` match its workflow name and gate id; any other word is looked for in the
execution id, the workflow name, the gate id and the details' JSON text. Case-insensitive.
"""

from __future__ import annotations

import json
from typing import Any

NAMED = {"workflow": "workflow_name", "gate": "step_id"}


def _text(value: Any) -> str:
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)).lower()


def gate_matches(row: dict[str, Any], words: list[str]) -> bool:
    """Whether the pending-gate ``row`` matches every one of ``words``."""
    details = row.get("details")
    everything = " ".join(
        [
            str(row.get("execution_id", "")),
            _text(row.get("workflow_name") or ""),
            _text(row.get("step_id") or ""),
            _text(details) if details is not None else "",
        ]
    )
    for word in words:
        key, sep, wanted = word.partition(":")
        wanted = wanted.lower()
        if sep and key in NAMED:
            if wanted not in _text(row.get(NAMED[key]) or ""):
                return False
        elif sep and key and isinstance(details, dict) and key in details:
            if wanted not in _text(details[key]):
                return False
        elif word.lower() not in everything:
            return False
    return True


def words_of(text: str) -> list[str]:
    return text.split()
