"""The ``kestrel-console`` script's entry point.

The engine installs without the console's libraries (``pip install kestrel``); the console is
the ``console`` extra. Run without it, the script says so in one line (exit 2, bad usage)
instead of an ImportError traceback.
"""

from __future__ import annotations

import importlib.util
import sys

# What the console imports that the engine does not (pyproject's `console` extra).
CONSOLE_LIBRARIES = ("typer", "rich", "textual", "pglast")
INSTALL_HINT = "pip install 'kestrel[console]'"


def missing_library() -> str | None:
    """The first console library that is not installed, or None. Found, not imported: most
    commands never load Textual or the SQL guard, and importing them here cost every command
    about 60 ms of start-up."""
    for name in CONSOLE_LIBRARIES:
        if importlib.util.find_spec(name) is None:
            return name
    return None


def main() -> None:
    """Check the console extra, then run the command."""
    absent = missing_library()
    if absent:
        print(
            f"error: kestrel-console needs the console extra ({absent} is not installed): {INSTALL_HINT}",
            file=sys.stderr,
        )
        sys.exit(2)
    from kestrel_console.cli import main as run

    run()
