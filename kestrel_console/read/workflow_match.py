"""How the console matches a workflow filter: a case-sensitive prefix, and a "did you mean"
when no workflow name starts with it (``workflow:remediate`` finds remediate-incident)."""

from __future__ import annotations

import difflib
import sys
from typing import Any

MAX_SUGGESTIONS = 3


def prefix_params(prefix: str | None, *, exact: bool = False) -> dict[str, Any]:
    """Parameters of the list's workflow filter: names in [from, to) that are LIKE the pattern.

    The range lets the planner walk the (workflow_name, id) index; LIKE keeps the match exact
    whatever the collation (None everywhere: no filter). ``exact``: the whole name only.
    """
    if not prefix:
        return {"workflow_like": None, "workflow_from": None, "workflow_to": None}
    if exact:  # a LIKE pattern without a wildcard is equality, whatever the collation
        return {"workflow_like": like_prefix(prefix)[:-1], "workflow_from": prefix, "workflow_to": None}
    last = ord(prefix[-1])
    upper = prefix[:-1] + chr(last + 1) if last < sys.maxunicode else None
    return {"workflow_like": like_prefix(prefix), "workflow_from": prefix, "workflow_to": upper}


def like_prefix(prefix: str) -> str:
    """A LIKE pattern for names starting with ``prefix`` taken literally (its own \\, % and _
    escaped), so the planner sees a constant prefix."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def describe_unknown_workflow(prefix: str, names: list[str]) -> str | None:
    """None if one of ``names`` starts with ``prefix``; else the sentence to show, naming the
    closest names (those containing it, ignoring case, then the most alike)."""
    if any(name.startswith(prefix) for name in names):
        return None
    folded = prefix.lower()
    close = [name for name in names if folded in name.lower()]
    close += [n for n in difflib.get_close_matches(prefix, names, n=MAX_SUGGESTIONS, cutoff=0.5) if n not in close]
    if close:
        hint = f"; did you mean {' or '.join(close[:MAX_SUGGESTIONS])}?"
    elif names:
        hint = f"; known workflows: {', '.join(names[:10])}"
    else:
        hint = "; no executions or workers yet"
    return f"no workflow named {prefix!r}{hint}"
