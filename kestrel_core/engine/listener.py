"""The worker's LISTEN connection: wakes the claim loop when work for it is announced.

One connection LISTENs on the schema's channel; a notification naming one of the worker's
workflows sets ``wake``. It never dies: on any error it reconnects with a backoff, and the
claim loop's polling covers the gap.
"""

from __future__ import annotations

import logging
import threading

from psycopg import sql

from kestrel_core.base.backoff import Backoff
from kestrel_core.base.masking import first_line
from kestrel_core.db.connection import connect
from kestrel_core.db.statements import notify_channel
from kestrel_core.workflow.contracts import EngineSettings

_RETRY = Backoff(0.1, cap=5.0)


def listen(
    settings: EngineSettings,
    names: set[str],
    wake: threading.Event,
    stopped: threading.Event,
    log: logging.Logger,
    worker_id: str,
) -> None:
    """LISTEN until ``stopped`` is set, setting ``wake`` for every notification naming ``names``."""
    channel = sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel(settings.schema)))
    retry = 0
    while not stopped.is_set():
        try:
            with connect(settings.dsn, application_name="kestrel-listener") as conn:
                conn.execute(channel)
                retry = 0
                wake.set()  # anything enqueued while we were not listening
                while not stopped.is_set():
                    for note in conn.notifies(timeout=0.5):
                        if note.payload in names:
                            wake.set()
        except Exception as exc:  # the listener must never die; polling covers the gap
            if stopped.is_set():
                return
            delay = _RETRY.delay(retry)
            log.warning(
                "event=listen_failed worker=%s error=%r retry_in_s=%.1f",
                worker_id,
                first_line(exc, settings.dsn),
                delay,
            )
            stopped.wait(delay)
            retry += 1
