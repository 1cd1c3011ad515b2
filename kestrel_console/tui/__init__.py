"""The Kestrel console TUI (Textual): ``KestrelConsole(settings).run()``, with the
``kestrel_console.settings.Settings`` the CLI built."""

from .app import KestrelConsole

__all__ = ["KestrelConsole"]
