"""Scrollbars drawn in whole cells.

Textual draws the ends of a scrollbar thumb with partial blocks (``▁▃▅``, ``▏▍``): at the right
edge of a screen they read as fragments of the dashboard's activity chart left behind. Here the
thumb covers whole cells only (a blank in the thumb's colour), so a scrollbar looks like one.
"""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender


class WholeCellScrollBarRender(ScrollBarRender):
    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


def use_whole_cell_scrollbars() -> None:
    """Make every scrollbar of the app whole-cell (Textual keeps the renderer on the class)."""
    ScrollBar.renderer = WholeCellScrollBarRender
