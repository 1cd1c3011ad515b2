"""The demo's background loops (trickle, bot operator): a daemon thread started and stopped."""

from __future__ import annotations

import threading


class BackgroundLoop:
    """Runs ``self._run()`` on a daemon thread; ``_run`` returns once ``self._stop`` is set."""

    thread_name = "kestrel-demo"

    def __init__(self) -> None:
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
