"""Every console test keeps its SQL history in its own folder, never the user's."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def private_state_home(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state
