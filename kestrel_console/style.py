"""One palette for statuses and outcomes, used by the values of the CLI and the TUI
(``formatting.py``) and by the TUI's timeline (``tui/widgets/timeline.py``): a running
execution is the same colour everywhere."""

from __future__ import annotations

from kestrel_core.lifecycle import LIVE_STATUSES, ExecutionStatus

# The colour of each execution status, step outcome and wait result.
COLOURS: dict[str, str] = {
    # execution statuses
    "enqueued": "cyan",
    "running": "yellow",
    "waiting": "magenta",
    "paused": "dark_orange",
    "success": "green",
    "error": "red",
    "cancelled": "dim",
    # step outcomes and wait results
    "abandoned": "dim",  # ended with its claim (a lease swept, a requeue, a resume, a deadline)
    "approved": "green",
    "rejected": "red",
    "timed_out": "red",
    "woke": "blue",
}
# Statuses that need the operator's eye are bold when written as words.
EMPHASISED = (*LIVE_STATUSES, ExecutionStatus.ERROR)
# As words (a status column, a heading): colour, bold where it matters.
STATUS_STYLES: dict[str, str] = {
    name: (f"bold {colour}" if name in EMPHASISED else colour) for name, colour in COLOURS.items()
}
# Waits drawn on a timeline: an approval waits like a waiting execution, a sleep wakes.
WAIT_COLOURS: dict[str, str] = {
    "approval": COLOURS["waiting"],
    "sleep": COLOURS["woke"],
    "child": "cyan",
    "event": "yellow",
}


def colour(name: str | None) -> str:
    """The plain colour of a status or outcome (bars, marks)."""
    return COLOURS.get(name or "", "")
