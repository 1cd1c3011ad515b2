"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kestrel_console.embedded_pg import LocalCluster


@pytest.fixture
def demo_dir() -> Iterator[Path]:
    """A fresh folder for the demo's server, enterable by the postgres OS user (tests run as root)."""
    path = Path(tempfile.mkdtemp(prefix="kestrel-demo-test-"))
    path.chmod(0o755)
    yield path / "pg"
    if (path / "pg" / "postmaster.pid").exists():  # a failed test left it running
        LocalCluster(path / "pg").destroy()
    shutil.rmtree(path, ignore_errors=True)
