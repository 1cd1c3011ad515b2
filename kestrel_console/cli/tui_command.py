"""``kestrel-console`` with no command: open the TUI."""

from __future__ import annotations

from typing import Any

from kestrel_core import KestrelError, mask_dsn

from .errors import fail


def open_tui(settings: Any, read_only: bool) -> None:
    """Run the console until the operator quits (``q`` on a top screen, or ctrl+q).

    The database is not contacted here: the TUI connects in its worker threads and shows a
    banner (and keeps retrying) while the server is unreachable.
    """
    from kestrel_console.tui import KestrelConsole

    try:
        app = KestrelConsole(settings, read_only=read_only)
    except (KestrelError, ValueError) as exc:
        fail(mask_dsn(str(exc)))
    app.run()
