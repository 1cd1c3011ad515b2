"""Fixtures of the engine tests, for the adversarial review's tests."""

from tests.core.conftest import app, ledger, start_worker  # noqa: F401 (fixtures)
