"""The key hints at the bottom of every screen: compact, and the command palette's hint only
where there is room for it (ctrl+p works everywhere and ``?`` lists it), so at 80 columns no
screen's own keys, ``?`` or ``q`` are cut off."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

PALETTE_HINT_MIN_WIDTH = 100


class KeyFooter(Footer):
    def __init__(self) -> None:
        super().__init__(compact=True)

    def on_mount(self) -> None:
        self._fit(self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        wanted = width >= PALETTE_HINT_MIN_WIDTH
        if self.show_command_palette != wanted:
            self.show_command_palette = wanted
            if self.is_mounted:
                self.call_after_refresh(self.recompose)  # Footer does not redraw it by itself
