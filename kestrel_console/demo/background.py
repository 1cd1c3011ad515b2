"""The demo's background loops (trickle, bot operator): a daemon thread started and stopped,
acting on one Kestrel app and telling ``on_event`` what it did."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kestrel_core import Kestrel


class BackgroundLoop:
    """Runs ``self._run()`` on a daemon thread; ``_run`` returns once ``self._stop`` is set."""

    thread_name = "kestrel-demo"

    def __init__(self, app: Kestrel, on_event: Callable[[str], None]) -> None:
        self.app = app
        self.on_event = on_event
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        raise NotImplementedError
