"""SIGINT and SIGTERM acted on outside the signal handler.

Python runs a signal handler in the main thread between two bytecodes, possibly in the middle of
code that holds a lock. A handler that takes a lock (``Event.set`` does) hangs for good when a
second signal arrives while the first one's handler holds it: two SIGTERMs close together, or
Ctrl-C pressed twice, left a worker process waiting on itself until SIGKILL. The handler here
takes no lock: it writes the signal's number to a pipe, and a thread of its own reads it and
calls ``on_signal`` there, where locks are safe.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # what stops a worker, its supervisor, the demo


class SignalRelay:
    """While entered (in the main thread), each SIGINT/SIGTERM calls ``on_signal(signum)`` in
    the relay's thread, in the order they came; elsewhere it does nothing (only the main thread
    may handle signals). On exit the previous handlers are back and the thread has ended.

    ``in_handler(signum)``, if given, runs in the handler itself once the relay has the signal:
    for what must happen in the main thread (raise KeyboardInterrupt); it must take no lock."""

    def __init__(self, on_signal: Callable[[int], None], in_handler: Callable[[int], None] | None = None) -> None:
        self.on_signal = on_signal
        self.in_handler = in_handler
        self._previous: dict[int, Any] = {}
        self._thread: threading.Thread | None = None
        self._read = self._write = -1

    def __enter__(self) -> SignalRelay:
        if threading.current_thread() is threading.main_thread():
            self._read, self._write = os.pipe()
            self._thread = threading.Thread(target=self._relay, name="kestrel-signals", daemon=True)
            self._thread.start()
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._thread is not None:
            os.close(self._write)  # the relay reads to the end, then ends
            self._thread.join(timeout=5.0)
            os.close(self._read)
            self._thread = None

    def _handle(self, signum: int, _frame: Any) -> None:
        os.write(self._write, bytes([signum]))  # no lock taken: see the module's docstring
        if self.in_handler is not None:
            self.in_handler(signum)

    def _relay(self) -> None:
        while received := os.read(self._read, 64):
            for signum in received:
                self.on_signal(signum)
