"""Bytecode for the test processes, compiled once before they start.

Each of xdist's test processes imports every test module to collect it: ~3.5 s of CPU each,
two thirds of it compiling (pytest rewrites each test module's asserts, then compiles it, and
the project's own modules have no bytecode until something writes it). Seven processes
started together on a fresh clone all compiled the same files: 12-13 s on 2 cores before the
first test. One collection run first writes that bytecode (``__pycache__``, ignored by git,
even when ``PYTHONDONTWRITEBYTECODE`` is set, which would keep every run cold); each process
then reads it and collects in ~1.3 s. pytest and Python check each file's size and time
against its source, so a changed file is compiled again, never run stale.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TIMEOUT_S = 120


def compile_once(config: pytest.Config) -> None:
    """Collect ``config.args`` in one process that writes bytecode, before xdist starts its
    processes. Nothing it prints is shown: a collection error is the real run's to report."""
    processes = config.getoption("numprocesses", None)  # None without xdist
    if config.option.collectonly or not isinstance(processes, int) or processes < 2:
        return
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"]
    try:
        subprocess.run(
            [*command, *config.args],
            cwd=config.invocation_params.dir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:  # pragma: no cover - a hung import: the run reports it
        pass
