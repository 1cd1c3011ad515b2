"""The worker process: the claim loop, runner threads and maintenance (``worker``), its
LISTEN wake-ups (``listener``), announcing it at start and retiring it (``registration``),
ticking schedules in its maintenance loop (``scheduler``), SIGINT/SIGTERM acted on outside
the signal handler (``signals``), and the supervisor of N worker processes (``supervisor``;
the child's side in ``supervised``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch, durable, admin, workflow.
"""

from typing import TYPE_CHECKING, Any

from kestrel_core.engine.signals import STOP_SIGNALS, SignalRelay
from kestrel_core.engine.supervised import adopt as supervised_adopt
from kestrel_core.engine.supervised import failed as supervised_failed
from kestrel_core.engine.supervised import ready as supervised_ready
from kestrel_core.engine.supervisor import Supervisor, default_processes

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
    "Supervisor",
    "Worker",
    "default_processes",
    "supervised_adopt",
    "supervised_failed",
    "supervised_ready",
]
