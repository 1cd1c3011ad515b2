"""Fixtures shared by the Reader's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kestrel_console.read import Reader


@pytest.fixture
def reader(dsn: str) -> Iterator[Reader]:
    """The console's Reader on the test's database, closed after the test."""
    with Reader(dsn) as r:
        yield r
