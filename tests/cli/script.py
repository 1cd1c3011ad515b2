"""The one way tests run ``kestrel-console``: ``console(*args, dsn=..., env=...)``.

In process by default: the script's own entry point (``kestrel_console.entry.main``) runs with
the argv, environment, standard streams and working directory a real process would get, and
the answer is a ``CompletedProcess`` (exit code, stdout, stderr kept apart; an uncaught
exception is a traceback on stderr and exit 1, as Python prints it). Starting the installed
script costs ~0.8 s of interpreter and import time per call; in process a call costs what the
command does.

``subprocess=True`` starts the installed script (found beside ``sys.executable``) instead: for
what only a process shows (signals, a terminal, the script's own start-up, embedded servers),
and for a command that must not share the test's interpreter (threads, fork).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess as sp
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "kestrel-console"
# Variables that would point the command elsewhere than the test says. Without a dsn the
# command finds no database configured (the demo then starts its own).
UNSET = (
    "KESTREL_DSN",
    "KESTREL_QUERIES",
    "KESTREL_OPERATOR",
    "KESTREL_DEMO_DIR",
    "KESTREL_READER_DSN",
    "KESTREL_READ_DSN",
    "PGHOST",
    "PGPORT",
    "PGHOSTADDR",
    "PGDATABASE",
    "PGUSER",
    "PGSERVICE",
)
# Signals the CLI may install handlers for (the worker, the demo): restored after each call.
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The command's environment: the test's, without ``UNSET``, tables 200 columns wide,
    then ``env``."""
    full = {key: value for key, value in os.environ.items() if key not in UNSET}
    full["COLUMNS"] = "200"
    full.update(env or {})
    return full


def console(
    *args: str,
    dsn: str | None = None,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 60,
    subprocess: bool = False,
) -> sp.CompletedProcess[str]:
    """``kestrel-console [--dsn DSN] ARGS...``: exit code, stdout and stderr as text.

    ``subprocess=True`` runs the installed script as a real process (``timeout`` applies to it
    only: in process, pytest-timeout bounds the call)."""
    argv = [*(["--dsn", dsn] if dsn is not None else []), *args]
    full_env = environment(env)
    if subprocess:
        assert SCRIPT.exists(), f"no kestrel-console beside {sys.executable}: pip install -e ."
        return sp.run(
            [str(SCRIPT), *argv], input=stdin, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout
        )
    return in_process(argv, full_env, stdin, cwd)


def run_demo(data_dir: Path, *args: str, timeout: float = 120) -> sp.CompletedProcess[str]:
    """``demo --no-tui ARGS`` to its end on the private server in ``data_dir`` (a real process:
    an embedded server and workers)."""
    env = {"KESTREL_DEMO_DIR": str(data_dir), "COLUMNS": "400"}
    return console("demo", "--no-tui", *args, env=env, timeout=timeout, subprocess=True)


def started(
    *args: str,
    dsn: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdout: int = sp.PIPE,
    stderr: int = sp.STDOUT,
) -> sp.Popen[str]:
    """``kestrel-console [--dsn DSN] ARGS...`` started as a real process and left running (the
    test stops it); its output as text, by default stdout and stderr together on ``stdout``."""
    argv = [str(SCRIPT), *(["--dsn", dsn] if dsn is not None else []), *args]
    return sp.Popen(argv, cwd=cwd, env=environment(env), stdout=stdout, stderr=stderr, text=True)


def read_terminal(master: int) -> bytes:
    """What a command wrote to the pseudo-terminal whose master end is ``master``, until it
    exited (its end closed)."""
    said = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the command exited and closed the terminal
            break
        if not chunk:
            break
        said += chunk
    return said


def in_process(
    argv: list[str], env: dict[str, str], stdin: str | None, cwd: str | Path | None
) -> sp.CompletedProcess[str]:
    """Run the script's entry point here, as a process would: see ``console``."""
    from kestrel_console.entry import main

    out, err = io.BytesIO(), io.BytesIO()
    code = 0
    with isolated(argv, env, stdin, out, err, cwd):
        try:
            main()
        except SystemExit as exc:
            code = exit_status(exc.code)
        except BaseException:  # what the interpreter would print before exiting 1
            sys.stderr.write(traceback.format_exc())
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            # Read before the streams are restored: a dropped wrapper closes its buffer.
            stdout, stderr = as_text(out), as_text(err)
    return sp.CompletedProcess([str(SCRIPT), *argv], code, stdout, stderr)


def exit_status(code: object) -> int:
    """The status ``SystemExit(code)`` leaves a process with (a non-int is printed, then 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def as_text(data: io.BytesIO) -> str:
    """Bytes read back as ``subprocess.run(text=True)`` reads a pipe (universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(data.getvalue()), encoding="utf-8").read()


@contextlib.contextmanager
def isolated(
    argv: list[str], env: dict[str, str], stdin: str | None, out: io.BytesIO, err: io.BytesIO, cwd: str | Path | None
) -> Iterator[None]:
    """The process-wide state a fresh process starts with, restored afterwards: argv, the
    environment (``os.environ`` is what libpq reads too), standard streams (pipes, not a
    terminal), the working directory, the root logger (the worker's ``basicConfig`` must
    find it bare and its handler must not outlive the call) and signal handlers."""
    saved_argv, saved_env = sys.argv, dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_cwd = os.getcwd()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_signals = {sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS}
    sys.argv = [str(SCRIPT), *argv]
    os.environ.clear()
    os.environ.update(env)
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8")), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    root.handlers = []
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = saved_handlers, saved_level
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        os.chdir(saved_cwd)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


def one_clear_line(done: sp.CompletedProcess[str], code: int, *needles: str) -> str:
    """Assert the command exited ``code`` with an ``error:`` line naming every needle and no
    traceback; return stderr."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip(), "no message on stderr"
    text = done.stderr.lower()
    for needle in needles:
        assert needle.lower() in text, (needle, done.stderr)
    return done.stderr
