"""The one error type of the private PostgreSQL server, and how a failed program is quoted."""

from __future__ import annotations

import subprocess

from kestrel_core import KestrelError


class EmbeddedPostgresError(KestrelError):
    """The private PostgreSQL server could not be found, created, started or stopped."""


def program_output(result: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(part.strip() for part in (result.stderr, result.stdout) if part and part.strip()) or (
        f"(no output, exit status {result.returncode})"
    )
