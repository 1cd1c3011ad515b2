"""Private PostgreSQL servers for tests that stop, restart or crash the server.

The engine's tests need a server they may take down, not the console: they see it through the
``PrivateServer`` Protocol below. The one implementation is the console's embedded server
(``kestrel_console.embedded_pg``), imported here, lazily, and nowhere under tests/core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class PrivateServer(Protocol):
    """What the tests do with a private server."""

    @property
    def port(self) -> int | None: ...

    def start(self, timeout: float = 30) -> None: ...

    def stop(self, mode: str = "fast", timeout: float = 60) -> None: ...

    def restart(self, timeout: float = 30) -> None: ...

    def kill(self, timeout: float = 10) -> None: ...

    def destroy(self) -> None: ...

    def is_running(self) -> bool: ...

    def create_database(self, name: str) -> str: ...

    def standby(self, data_dir: Path) -> PrivateServer: ...

    def promote(self, timeout: float = 60) -> None: ...


def new_private_server(
    data_dir: Path, *, durable: bool = False, settings: dict[str, int | str] | None = None
) -> PrivateServer:
    """A stopped private server whose data lives in ``data_dir`` (``settings``: server settings)."""
    from kestrel_console.embedded_pg import LocalCluster

    return LocalCluster(data_dir, durable=durable, settings=settings)
