"""Run the installed ``kestrel-console`` (found beside ``sys.executable``) as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "kestrel-console"


def console(
    *args: str, dsn: str | None = None, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``kestrel-console [--dsn DSN] ARGS...``: exit code, stdout and stderr as text."""
    assert SCRIPT.exists(), f"no kestrel-console beside {sys.executable}: pip install -e ."
    full_env = {k: v for k, v in os.environ.items() if k != "KESTREL_DSN"}
    full_env.update({"COLUMNS": "200", **(env or {})})
    cmd = [str(SCRIPT), *(["--dsn", dsn] if dsn is not None else []), *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=full_env, timeout=timeout)


def one_clear_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """Assert the command exited ``code`` with an ``error:`` line naming every needle and no
    traceback; return stderr."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip(), "no message on stderr"
    text = done.stderr.lower()
    for needle in needles:
        assert needle.lower() in text, (needle, done.stderr)
    return done.stderr
