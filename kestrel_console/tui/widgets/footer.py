"""The key hints at the bottom of every screen: compact, and the command palette's hint only
where there is room for it (ctrl+p works everywhere and ``?`` lists it), so at 80 columns no
screen's own keys, ``?`` or ``q`` are cut off."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # not exported by textual.widgets; Textual is pinned

PALETTE_HINT_MIN_WIDTH = 100
COMPACT = "-compact"


class KeyFooter(Footer):
    def __init__(self) -> None:
        super().__init__(compact=True)
        self._composed: tuple[object, ...] | None = None  # what the keys shown were made from

    def compose(self) -> ComposeResult:
        """Footer's keys, each marked compact before it is mounted. A key marks itself when its
        ``compact`` is bound at mount, and that mark restyled the key a second time: the footer
        is rebuilt whenever the keys on offer change, and those restyles were 7-9 % of the
        console tests' CPU (cProfile of the screen-switching tests)."""
        self._composed = self._shown() if self._bindings_ready else None
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.add_class(COMPACT, update=False)
            yield widget

    async def recompose(self) -> None:
        """Rebuilt only if the keys it would show changed. Footer rebuilds at every change of
        the screen's bindings (focus moving, a refresh), mostly to the same keys: those
        rebuilds (new keys mounted and styled) were 12 % of four screen-switching test files'
        CPU (cProfile); their user CPU went from 9.1-9.7 s to 7.4-7.7 s."""
        if self.is_attached and self._bindings_ready and self._shown() == self._composed:
            return
        await super().recompose()

    def _shown(self) -> tuple[object, ...]:
        """What ``compose`` makes the keys from: the bindings shown, enabled or not, their
        tooltips, and whether the palette's key is shown."""
        bindings = tuple(
            (binding, enabled, tooltip)
            for (_, binding, enabled, tooltip) in self.screen.active_bindings.values()
            if binding.show
        )
        return (self.show_command_palette, self.compact, self.combine_groups, bindings)

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
