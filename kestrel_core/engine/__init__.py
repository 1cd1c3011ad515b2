"""The worker process: the claim loop, runner threads and maintenance (``worker``), its
LISTEN wake-ups (``listener``), announcing it at start and retiring it (``registration``),
ticking schedules in its maintenance loop (``scheduler``), SIGINT/SIGTERM acted on outside
the signal handler (``signals``), its options as one checked value (``settings``) and its
lifecycle as one state (``worker_state``). (The supervisor of N worker processes is the CLI's:
kestrel_console/cli/supervision.)

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch, durable, admin, workflow.
"""

from typing import TYPE_CHECKING, Any

from kestrel_core.engine.settings import WorkerOptions, WorkerSettings
from kestrel_core.engine.signals import STOP_SIGNALS, SignalRelay
from kestrel_core.engine.worker_state import WorkerState

if TYPE_CHECKING:
    from kestrel_core.engine.worker import Worker


def __getattr__(name: str) -> Any:
    """``Worker`` on first use: it loads the whole run path (workflow, durable), which every CLI
    command would otherwise pay for at start (cli/errors.py imports this package)."""
    if name == "Worker":
        from kestrel_core.engine.worker import Worker

        return Worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "STOP_SIGNALS",
    "SignalRelay",
    "Worker",
    "WorkerOptions",
    "WorkerSettings",
    "WorkerState",
]
