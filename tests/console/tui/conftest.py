"""Every console test keeps its SQL history in its own folder, never the user's, and has its
screen drawn when it reads it, not at every frame."""

from __future__ import annotations

import pytest
from textual.screen import Screen

_DRAW_FRAME = Screen._compositor_refresh


def _frame_not_drawn(self: Screen) -> None:
    """Headless, a frame is drawn only to be dropped: mark it done instead (what
    ``_compositor_refresh`` does after drawing), and draw as usual anywhere else."""
    app = self.app
    if app.is_headless and not app.is_inline and self is app.screen:
        self._dirty_widgets.clear()
        self._compositor._dirty_regions.clear()
        app._update_mouse_over(self)
    else:
        _DRAW_FRAME(self)


@pytest.fixture(autouse=True)
def private_state_home(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.fixture(autouse=True)
def frames_drawn_when_read(request, monkeypatch):
    """Under ``run_test`` Textual draws every frame it would send to a terminal, then drops it:
    half of these tests' CPU (this folder: 3 min 47 s of CPU with it, 1 min 50 s without). A
    test sees the screen through ``helpers.screen_lines``, which draws all of it then. Tests
    marked ``drawn_frames`` keep Textual's own frames (``test_help_fits`` walks every screen
    at two sizes so)."""
    if request.node.get_closest_marker("drawn_frames") is None:
        monkeypatch.setattr(Screen, "_compositor_refresh", _frame_not_drawn)
