"""A DataTable that says when rows or columns are out of sight: its bottom border's subtitle
holds the sign ("↓ more rows · → more columns") and it has class ``-cut`` while cut (its
stylesheet draws that border), redrawn on every scroll, resize and change of size."""

from __future__ import annotations

from textual.widgets import DataTable

MORE_COLUMNS = "→ more columns"  # the sign that columns are hidden to the right
MORE_ROWS = "↓ more rows"  # the sign that rows are hidden below


def cut_sign(table: DataTable) -> str:
    """ "↓ more rows · → more columns", or the part that holds, or "": what a cut table says."""
    signs = []
    if table.max_scroll_y > table.scroll_y:
        signs.append(MORE_ROWS)
    if table.max_scroll_x > table.scroll_x:
        signs.append(MORE_COLUMNS)
    return " · ".join(signs)


class CutTable(DataTable):
    def note_cut(self) -> None:
        """Show the sign of what is cut now (``cut_sign``)."""
        sign = cut_sign(self)
        if self.border_subtitle != sign:
            self.border_subtitle = sign
        self.set_class(bool(sign), "-cut")

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_x(old_value, new_value)
        self.note_cut()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.note_cut()

    def watch_virtual_size(self) -> None:
        self.call_after_refresh(self.note_cut)

    def on_resize(self) -> None:
        self.call_after_refresh(self.note_cut)
