"""Run the installed ``kestrel-console`` (the script pip put beside ``sys.executable``) as a
subprocess, the way a user does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "kestrel-console"
# Variables that would point the command elsewhere than the test says.
# Without a dsn the command finds no database configured (the demo then starts its own).
UNSET = (
    "KESTREL_DSN",
    "KESTREL_QUERIES",
    "KESTREL_OPERATOR",
    "KESTREL_DEMO_DIR",
    "PGHOST",
    "PGPORT",
    "PGHOSTADDR",
    "PGDATABASE",
    "PGUSER",
    "PGSERVICE",
)


def kestrel_console(
    *args: str, dsn: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``kestrel-console ARGS`` with ``$KESTREL_DSN`` = ``dsn``; returns the finished process."""
    assert SCRIPT.exists(), f"no kestrel-console beside {sys.executable}: install the project (pip install -e .)"
    full_env = {key: value for key, value in os.environ.items() if key not in UNSET}
    full_env["COLUMNS"] = "160"
    if dsn is not None:
        full_env["KESTREL_DSN"] = dsn
    full_env.update(env or {})
    return subprocess.run([str(SCRIPT), *args], env=full_env, capture_output=True, text=True, timeout=timeout)
