"""The console's headless read side, shared by the CLI and the TUI: ``Reader`` (one connection,
canned read-only queries, one module per job), schedules, queue wording, workflow matching."""

from __future__ import annotations

from .blockers import describe_blocker, describe_queue_blocker
from .reader import Reader
from .session import APPLICATION_NAME, DEFAULT_DEAD_AFTER_S, SET_SESSION, ReadTimeout
from .workflow_match import describe_unknown_workflow

__all__ = [
    "APPLICATION_NAME",
    "DEFAULT_DEAD_AFTER_S",
    "SET_SESSION",
    "ReadTimeout",
    "Reader",
    "describe_blocker",
    "describe_queue_blocker",
    "describe_unknown_workflow",
]
