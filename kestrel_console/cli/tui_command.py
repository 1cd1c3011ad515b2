"""``kestrel-console`` with no command: open the TUI."""

from __future__ import annotations

import sys
from typing import Any

from kestrel_core import KestrelError, mask_dsn

from .errors import fail

# Textual reads keys from stdin, draws on stderr and sizes itself from stdout (80x24 when
# stdout is not a terminal): the TUI needs all three on the terminal.
STREAMS = (("stdin", sys.__stdin__), ("stdout", sys.__stdout__), ("stderr", sys.__stderr__))


def not_terminals() -> list[str]:
    """The standard streams that are not a terminal (piped, redirected or closed)."""
    out = []
    for name, stream in STREAMS:
        try:
            if stream is None or not stream.isatty():
                out.append(name)
        except (ValueError, OSError):  # closed
            out.append(name)
    return out


def open_tui(settings: Any, read_only: bool, quit_stops: str | None = None) -> None:
    """Run the console until the operator quits (``q`` on a top screen, or ctrl+q).

    Refused (exit 2) when a standard stream is not a terminal: Textual would draw an 80x24
    screen over whatever size the real terminal has. The database is not contacted here: the
    TUI connects in its worker threads and shows a banner (and keeps retrying) while the
    server is unreachable. ``quit_stops``: what quitting also stops (the demo), asked first.
    """
    missing = not_terminals()
    if missing:
        fail(
            f"the console needs a terminal, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one (piped or redirected): run "
            "kestrel-console in a terminal, or use a command (status, list, show, sql) "
            "whose output can be piped",
            code=2,
        )
    from kestrel_console.tui import KestrelConsole

    try:
        app = KestrelConsole(settings, read_only=read_only, quit_stops=quit_stops)
    except (KestrelError, ValueError) as exc:
        fail(mask_dsn(str(exc)))
    app.run()
