"""The SQL screen's query history, kept between sessions in the user's state folder
(``$XDG_STATE_HOME/kestrel/sql-history.json``, else ``~/.local/state/kestrel/...``), newest
first, capped, written whole to a temporary file then renamed so a crash never leaves half of it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HISTORY_LIMIT = 200
FILE_NAME = "sql-history.json"


def default_path() -> Path:
    """Where the history lives: ``$XDG_STATE_HOME/kestrel`` (the XDG base directory spec)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "kestrel" / FILE_NAME


class QueryHistory:
    """Past queries, newest first; a query run again moves to the top instead of repeating."""

    def __init__(self, path: Path | None = None, limit: int = HISTORY_LIMIT) -> None:
        self.path = path if path is not None else default_path()
        self.limit = limit
        self.entries: list[str] = []
        self.error: str | None = None  # why the file could not be read or written (shown once)

    def load(self) -> list[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = []
        except (OSError, ValueError) as exc:
            self.error = f"query history not read from {self.path}: {exc}"
            data = []
        self.entries = [q for q in data if isinstance(q, str) and q.strip()][: self.limit]
        return self.entries

    def add(self, query: str) -> None:
        query = query.strip()
        if not query:
            return
        self.entries = [query] + [q for q in self.entries if q != query]
        del self.entries[self.limit :]
        self._save()

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".tmp")
            partial.write_text(json.dumps(self.entries, ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(partial, self.path)
        except OSError as exc:
            self.error = f"query history not saved to {self.path}: {exc}"
