"""The TUI refuses to start when stdout is not a terminal (issue 11, item 12): Textual would
size itself 80x24 and draw over a larger terminal."""

from __future__ import annotations

import os
import pty
import subprocess

from tests.cli.script import SCRIPT, console, read_terminal


def test_stdout_piped_is_refused_with_exit_2(dsn):
    master, slave = pty.openpty()  # stdin and stderr on a terminal, stdout into a pipe
    try:
        proc = subprocess.run(
            [str(SCRIPT), "--dsn", dsn],
            stdin=slave,
            stderr=slave,
            stdout=subprocess.PIPE,
            timeout=60,
            env={**os.environ, "TERM": "xterm"},
        )
        os.close(slave)
        said = read_terminal(master)
    finally:
        os.close(master)
    text = said.decode(errors="replace")
    assert proc.returncode == 2, text
    assert "the console needs a terminal, but stdout is not one" in text
    assert "\x1b[" not in text and proc.stdout == b""  # nothing drawn


def test_every_stream_piped_names_them_all(dsn):
    # The TUI looks at the process's own streams (sys.__stdout__): a real process.
    proc = console(dsn=dsn, stdin="", subprocess=True)
    assert proc.returncode == 2
    assert "stdin, stdout, stderr are not one" in proc.stderr
    assert proc.stdout == ""
