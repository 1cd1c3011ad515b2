"""Every console test keeps its SQL history in its own folder, never the user's, has its
screen drawn when it reads it, not at every frame, and parses each stylesheet and compiles the
SQL highlighting query once per process."""

from __future__ import annotations

import pytest
from textual.css.stylesheet import Stylesheet
from textual.document._syntax_aware_document import SyntaxAwareDocument
from textual.screen import Screen

_DRAW_FRAME = Screen._compositor_refresh
_PARSE_RULES = Stylesheet._parse_rules
_parsed: dict[tuple[object, ...], list[tuple[dict[str, str], object]]] = {}
_PREPARE_QUERY = SyntaxAwareDocument.prepare_query
_prepared: dict[tuple[object, str], object] = {}


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


def _parsed_once(self: Stylesheet, css: str, read_from: object, *args: object, **kwargs: object) -> object:
    """``Stylesheet._parse_rules`` remembered across stylesheets: Textual caches what a
    stylesheet parsed in that stylesheet, and every app (one per test) and every first visit
    of a screen makes a new one. The rules depend on the text, where it was read from, the
    other arguments and the theme's variables: the variables are compared, not hashed into the
    key (sorting and hashing them took most of this function's time, ~700 calls a test)."""
    key = (css, read_from, args, tuple(kwargs.items()))
    variables = self._variables
    parsed = _parsed.setdefault(key, [])
    for seen_with, rules in parsed:
        if seen_with == variables:
            return rules
    rules = _PARSE_RULES(self, css, read_from, *args, **kwargs)
    parsed.append((dict(variables), rules))
    return rules


def _prepared_once(self: SyntaxAwareDocument, query: str) -> object:
    """``SyntaxAwareDocument.prepare_query`` remembered per language and query text: every SQL
    editor's new document compiles tree-sitter's highlighting query again (28 ms each; Textual's
    own docstring: "Queries should be prepared once, then reused")."""
    key = (self.language, query)
    if key not in _prepared:
        _prepared[key] = _PREPARE_QUERY(self, query)
    return _prepared[key]


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


@pytest.fixture(autouse=True)
def stylesheets_parsed_once(monkeypatch):
    """Each app's stylesheets parse Textual's and the console's CSS anew: 1 s of the 12 s of
    CPU that four navigation tests take. Parsed once per test process instead."""
    monkeypatch.setattr(Stylesheet, "_parse_rules", _parsed_once)


@pytest.fixture(autouse=True)
def highlight_queries_prepared_once(monkeypatch):
    monkeypatch.setattr(SyntaxAwareDocument, "prepare_query", _prepared_once)
