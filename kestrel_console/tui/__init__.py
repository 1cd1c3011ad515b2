"""The Kestrel console TUI (Textual): ``KestrelConsole(settings).run()``."""

from .app import KestrelConsole
from .config import ConsoleConfig

__all__ = ["ConsoleConfig", "KestrelConsole"]
