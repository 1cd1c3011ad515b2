"""Fixtures shared by the ad-hoc SQL tests. Each module seeds its own database (its ``seeded``
fixture, which returns the dsn); the sessions here open on it."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import KeptSessions


@pytest.fixture
def observer(seeded: str, sessions: KeptSessions) -> psycopg.Connection:
    """A second session, to see from outside what the one under test holds or changed."""
    return sessions.session(seeded, "observer")
