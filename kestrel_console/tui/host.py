"""What a live screen needs of the console app, as a Protocol.

``LiveScreen`` (live.py) reads and acts through these few members of ``KestrelConsole``; naming
them here keeps live.py from importing app.py, which imports every screen (no import circle).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..settings import Settings
from .operator import ActionOutcome, Operator


class ConsoleHost(Protocol):
    """The app as its screens see it: settings, the operator API, and where to report."""

    config: Settings
    operator: Operator
    read_only: bool
    refresh_interval: float
    # Executions acted on that the read replica has not replayed yet: id -> (primary status, LSN).
    awaiting_replica: dict[int, tuple[str, int]]

    def db_ok(self) -> None: ...

    def db_failed(self, exc: Exception) -> None: ...

    def tell(self, message: str, *, severity: str = "information") -> None: ...

    def track_reader(self, reader: Any) -> None: ...

    def track_session(self, session: Any) -> None: ...

    def refuse_read_only(self, action: str) -> None: ...

    def action_done(self, outcome: ActionOutcome) -> None: ...

    def action_failed(self, action: str, exc: Exception) -> None: ...

    async def action_show(self, mode: str) -> None: ...

    async def action_back(self) -> None: ...
