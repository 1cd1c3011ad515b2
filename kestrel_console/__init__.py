"""kestrel-console: the operator's terminal console for Kestrel (CLI and TUI)."""

__version__ = "0.1.0"
