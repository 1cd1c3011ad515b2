"""Process supervision for ``kestrel-console worker --processes N``: the supervisor of N worker
processes (``supervisor``) and the child's side of it (``supervised``: report ready or why not,
never outlive the supervisor).

It lives in the CLI, not in the engine: only the command line runs several worker processes,
and an application that embeds a worker (``app.run_worker()``) carries none of it.
"""

from .supervised import adopt as supervised_adopt
from .supervised import failed as supervised_failed
from .supervised import ready as supervised_ready
from .supervisor import Supervisor, SupervisorGaveUp, default_processes

__all__ = [
    "Supervisor",
    "SupervisorGaveUp",
    "default_processes",
    "supervised_adopt",
    "supervised_failed",
    "supervised_ready",
]
