"""The worker's LISTEN connection: wakes the claim loop when work for it is announced.

One connection LISTENs on the schema's channel; a notification naming one of the worker's
workflows sets ``wake``. It never dies: on any error it reconnects with a backoff, and the
claim loop's polling covers the gap. It waits on its socket and on a pipe that ``stop`` writes
to, so a stopping worker does not wait for a timeout to pass before its listener ends.
"""

from __future__ import annotations

import logging
import os
import select
import threading

from psycopg import sql

from kestrel_core.base.backoff import Backoff
from kestrel_core.base.masking import first_line
from kestrel_core.db.connection import connect
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import notify_channel
from kestrel_core.workflow.contracts import EngineSettings

SQL = statements_beside(__file__)

_RETRY = Backoff(0.1, cap=5.0)


class Listener:
    """``run`` LISTENs (in its own thread) until ``stop``, setting ``wake`` for every
    notification naming one of ``names``."""

    def __init__(
        self,
        settings: EngineSettings,
        names: set[str],
        wake: threading.Event,
        log: logging.Logger,
        worker_id: str,
    ) -> None:
        self.settings = settings
        self.names = names
        self.wake = wake
        self.log = log
        self.worker_id = worker_id
        self._stopped = threading.Event()
        self._stop_read, self._stop_write = os.pipe()

    def stop(self) -> None:
        """End ``run`` now (its wait for a notification included); safe from any thread."""
        if not self._stopped.is_set():
            self._stopped.set()
            os.write(self._stop_write, b"x")

    def close(self) -> None:
        """Stop, and close the pipe (once ``run`` has ended: its thread is joined first)."""
        self.stop()
        if self._stop_read >= 0:
            os.close(self._stop_read)
            os.close(self._stop_write)
            self._stop_read = self._stop_write = -1

    def run(self) -> None:
        channel = sql.SQL(SQL.listen).format(channel=sql.Identifier(notify_channel(self.settings.schema)))
        retry = 0
        while not self._stopped.is_set():
            try:
                with connect(self.settings.dsn, application_name="kestrel-listener") as conn:
                    conn.execute(channel)
                    retry = 0
                    self.wake.set()  # anything enqueued while we were not listening
                    # poll, not select: a process with many sockets may give this one a descriptor over 1023.
                    poller = select.poll()
                    poller.register(conn.fileno(), select.POLLIN)
                    poller.register(self._stop_read, select.POLLIN)
                    while True:
                        poller.poll()  # the socket, or stop's pipe
                        if self._stopped.is_set():
                            return
                        for note in conn.notifies(timeout=0):  # what the socket holds, no wait
                            if note.payload in self.names:
                                self.wake.set()
            except Exception as exc:  # the listener must never die; polling covers the gap
                if self._stopped.is_set():
                    return
                delay = _RETRY.delay(retry)
                self.log.warning(
                    "event=listen_failed worker=%s error=%r retry_in_s=%.1f",
                    self.worker_id,
                    first_line(exc, self.settings.dsn),
                    delay,
                )
                self._stopped.wait(delay)
                retry += 1
