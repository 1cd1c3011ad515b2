"""A loop on a thread of its own: the load a benchmark keeps up while it measures (mvcc.py's
feeder, migration.py's probe)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass
class Background:
    """Runs ``_run`` on a daemon thread from ``start()``; ``stop()`` sets ``_stop``, which the
    loop watches, and waits for it up to ``join_s`` seconds."""

    thread_name: ClassVar[str] = "background"
    join_s: ClassVar[float] = 30.0
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.join_s)

    def _run(self) -> None:
        raise NotImplementedError
