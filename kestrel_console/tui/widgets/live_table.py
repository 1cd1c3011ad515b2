"""A DataTable whose rows are keyed and updated in place on every refresh (only changed cells
are rewritten, rows that left are removed, new ones added), with rows marked by ``space`` and,
given columns that sort, sorted by a column (its screen's keys, or a click on a header).

Each column is declared once, as a ``Column``: its key, header, the width it is cut to in a
narrow table, what it sorts by, and whether a narrow terminal keeps it.

Marks are row keys (execution ids), so they stay on their rows through every refresh. The
cursor follows its row when rows are added or re-sorted; when the row under it leaves (decided
or changed elsewhere) the cursor lands on a neighbour the operator did not choose, and
``cursor_lost`` names the row that left until the operator moves the cursor themselves: an
action is then refused instead of applied to the neighbour (``live.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey

from ...safe_text import literal
from .cut_table import MORE_COLUMNS, CutTable

MARK = "●"
MARK_COLUMN = "mark"
# A table narrower than this cuts its ``squeeze`` columns (80 columns: Approvals' waiting, since
# and deadline stay in sight beside a long workflow name or gate id).
SQUEEZE_BELOW = 120


@dataclass(frozen=True)
class Column:
    """A column of a LiveTable, with all that is said of it in one place.

    ``key``: what the cells and the sort name it by; ``title``: its header (default: the key);
    ``squeeze``: the width it is cut to (with …) in a table narrower than SQUEEZE_BELOW, so that
    the columns after it stay in sight; ``sort``: what it sorts by, the stored value, not the
    text shown (2h after 9m): a field of the source row, or a function of it; ``narrow``: kept
    when a narrow terminal shows only the essential columns (``set_narrow``)."""

    key: str
    title: str | None = None
    squeeze: int | None = None
    sort: str | Callable[[dict[str, Any]], Any] | None = None
    narrow: bool = False

    @property
    def label(self) -> str:
        return self.key if self.title is None else self.title

    def sort_key(self) -> Callable[[dict[str, Any]], Any] | None:
        """The value of a source row this column sorts by (None: it does not sort)."""
        return itemgetter(self.sort) if isinstance(self.sort, str) else self.sort


class LiveTable(CutTable):
    """Rows are ``(key, {column: cell})``; the first column shows the mark."""

    DEFAULT_CSS = """
    LiveTable { height: 1fr; }
    LiveTable.signs-cut.-cut { border-bottom: solid $primary-darken-2; border-subtitle-color: $text-muted; }
    """
    # Home and End go to the first and last row (DataTable's scroll sideways).
    BINDINGS: ClassVar[list[Any]] = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        markable: bool = False,
        default_sort: tuple[str, bool] | None = None,
        **kwargs: Any,
    ) -> None:
        """``default_sort``: (column, descending) the rows come in."""
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.all_columns = [(c.key, c.label) for c in columns]
        self.narrow_keys = [c.key for c in columns if c.narrow]  # the columns kept when the terminal is narrow
        self.column_spec = list(self.all_columns)  # the columns shown now
        self.markable = markable
        self.marks: set[str] = set()
        self._cells: dict[str, dict[str, str]] = {}  # what each cell shows now (plain text)
        self.rows_data: dict[str, dict[str, Any]] = {}  # the source row of each key (for actions)
        self.cell_updates = 0  # cells rewritten in place since mount
        self.rows_added = 0  # rows ever added: a refresh adds only the rows that are new
        self._clipped = False
        # The row that was under the cursor when a refresh removed it, the latest such row if
        # several left in a row (None once the operator moves the cursor): what they meant to
        # act on is gone. ``cursor_lost_why`` says how it went.
        self.cursor_lost: str | None = None
        self.cursor_lost_why = "left the list (changed elsewhere)"
        self._leaving: set[str] = set()  # rows this console acted on: their leaving is no surprise
        self.sort_keys = {c.key: sort for c in columns if (sort := c.sort_key()) is not None}
        self.default_sort = default_sort
        self.column_sort = default_sort  # (column, descending), kept across refreshes
        self._arrived: list[str] = []  # row keys in the order the last sync gave them
        self.squeeze = {c.key: c.squeeze for c in columns if c.squeeze is not None}

    class Sorted(Message):
        """The operator chose another sort (the screen may say so)."""

    class Clipped(Message):
        """Whether columns are hidden to the right changed (the screen may say so)."""

    class TopShown(Message):
        """The first row came into sight, or left it (scrolled)."""

    class CursorMoved(Message):
        """The operator moved the cursor (a key or a click), not a refresh."""

    def more_right(self) -> bool:
        """Columns are hidden to the right (scroll → to see them)."""
        return self.max_scroll_x > self.scroll_x

    def more_hint(self) -> str:
        """`` · → more columns`` while columns are hidden to the right, else "": what a screen
        appends to the summary line above a borderless table (and redraws on ``Clipped``)."""
        return f" · {MORE_COLUMNS}" if self.more_right() else ""

    def note_cut(self) -> None:
        # A bordered panel says it itself ("↓ more rows · → more columns"), as does a table of
        # class ``signs-cut`` (a bottom border while cut); a table without a border leaves the
        # columns to its screen's summary line.
        super().note_cut()
        clipped = self.more_right()
        if clipped != self._clipped:
            self._clipped = clipped
            self.post_message(self.Clipped())

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)  # CutTable's: the sign first
        if (old_value > 0) != (new_value > 0):
            self.post_message(self.TopShown())

    def top_hidden(self) -> bool:
        """The first rows are scrolled out of sight, above the table."""
        return self.scroll_y > 0

    def on_resize(self) -> None:
        self.fit_columns()  # then CutTable's on_resize (Textual calls each class's handler)

    def fit_columns(self) -> None:
        """Each column exactly as wide as its widest cell or its label shows now: narrower
        again once the wide rows have left (DataTable only ever widens a column as rows
        leave), and a ``squeeze`` column cut in a narrow table."""
        narrow = 0 < self.size.width < SQUEEZE_BELOW
        changed = False
        for key, _ in self.column_spec:
            column = self.columns.get(ColumnKey(key))
            if column is None:
                continue
            label = column.label.cell_len
            wanted = max([label, *(cell_len(cells.get(key, "")) for cells in self._cells.values())])
            cap = self.squeeze.get(key)
            if narrow and cap is not None:
                wanted = min(wanted, max(cap, label))
            if column.content_width != wanted:
                column.content_width = wanted
                changed = True
        if changed:
            self._require_update_dimensions = True  # as add_column does: widths are measured again
            self._update_count += 1  # the rows' render caches are keyed by it
            self.refresh()

    def on_mount(self) -> None:
        if self.markable:
            self.add_column(" ", key=MARK_COLUMN, width=1)
        for key, label in self.column_spec:
            self.add_column(label, key=key)

    def set_narrow(self, narrow: bool) -> bool:
        """Show only the ``narrow`` columns (or all again). True if that changed: the rows are
        then dropped and the caller syncs them again."""
        spec = (
            [c for c in self.all_columns if c[0] in self.narrow_keys]
            if narrow and self.narrow_keys
            else list(self.all_columns)
        )
        if spec == self.column_spec:
            return False
        self.column_spec = spec
        self.clear(columns=True)
        self._cells.clear()
        self.rows_data.clear()
        self.marks.clear()
        self._arrived = []
        if self.markable:
            self.add_column(" ", key=MARK_COLUMN, width=1)
        for key, label in self.column_spec:
            self.add_column(label, key=key)
        return True

    # -- rows --------------------------------------------------------------------------------

    def sync(
        self,
        rows: Iterable[tuple[str, dict[str, Any], dict[str, Any]]],
        *,
        sort_column: str | None = None,
        sort_value: Callable[[str], Any] = str,
        reverse: bool = False,
    ) -> None:
        """Make the table show exactly ``rows`` (key, cells, source row), in place.

        New rows are added at the end; then, if ``sort_column`` is given and the order is off,
        rows are re-sorted by ``sort_value`` of that column's text (no row is rebuilt). A table
        with columns that sort shows them in the order given, or in the chosen sort (ties in the
        order given).
        """
        current_key = self.cursor_key()
        wanted: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
            k: ({column: _safe(v) for column, v in c.items()}, src) for k, c, src in rows
        }
        for key in [k for k in self._cells if k not in wanted]:
            self.remove_row(key)
            del self._cells[key]
            self.rows_data.pop(key, None)
            self.marks.discard(key)
        for key, (cells, source) in wanted.items():
            self.rows_data[key] = source
            shown = self._cells.get(key)
            if shown is None:
                values = ([self._mark_cell(key)] if self.markable else []) + [
                    cells.get(c, "") for c, _ in self.column_spec
                ]
                self.add_row(*values, key=key)
                self.rows_added += 1
                self._cells[key] = {c: _plain(cells.get(c, "")) for c, _ in self.column_spec}
                continue
            for column, _ in self.column_spec:
                value = cells.get(column, "")
                plain = _plain(value)
                if shown.get(column) != plain or (isinstance(value, Text) and _style_changed(self, key, column, value)):
                    # fit_columns below widens (or narrows) the column to its values now.
                    self.update_cell(key, column, value)
                    shown[column] = plain
                    self.cell_updates += 1
        self._arrived = list(wanted)
        if self.sort_keys:
            self.reorder(self._sorted(self._arrived))
            self.mark_sorted()
        elif sort_column is not None:
            keys = self.keys()
            wanted_order = sorted(keys, key=lambda k: sort_value(self._cells[k][sort_column]), reverse=reverse)
            if keys != wanted_order:
                self.sort(sort_column, key=lambda v: sort_value(_plain(v)), reverse=reverse)
        self.fit_columns()
        if current_key is not None and current_key in self._cells:
            self.move_cursor(row=self.get_row_index(current_key), animate=False)
        elif current_key is not None and current_key not in self._leaving:
            # The row the operator last saw under the cursor: if the neighbour it landed on
            # leaves too, that neighbour is named, not the first row that left.
            self.lose_cursor(current_key, "left the list (changed elsewhere)")
        self._leaving &= set(self._cells)

    def reorder(self, keys: Sequence[str]) -> None:
        """Show the rows in the order of ``keys`` (every key shown, once); the cursor stays
        on its row."""
        if list(keys) == self.keys():
            return
        current = self.cursor_key()
        by_value = {row_key.value: row_key for row_key in self.rows}
        # DataTable.sort's key function sees cell values only, never the row key an order is
        # read by: set the row order as sort() itself does.
        self._row_locations = TwoWayDict({by_value[k]: i for i, k in enumerate(keys)})
        self._update_count += 1
        self.refresh()
        if current is not None:
            self.move_cursor(row=self.get_row_index(current), animate=False)

    # -- sort --------------------------------------------------------------------------------

    def _sorted(self, keys: list[str]) -> list[str]:
        """``keys`` in the chosen sort, rows without a value last, ties as given."""
        if self.column_sort is None or self.column_sort == self.default_sort:
            return keys
        column, descending = self.column_sort
        value = self.sort_keys[column]
        have = [k for k in keys if value(self.rows_data[k]) is not None]
        have.sort(key=lambda k: _sortable(value(self.rows_data[k])), reverse=descending)  # stable
        return have + [k for k in keys if value(self.rows_data[k]) is None]

    def sort_by(self, column: str, descending: bool) -> None:
        """Sort by ``column`` from now on (the cursor stays on its row)."""
        self.column_sort = (column, descending)
        self.reorder(self._sorted([k for k in self._arrived if k in self._cells]))
        self.mark_sorted()
        self.post_message(self.Sorted())

    def _first_direction(self, column: str) -> bool:
        """A column is first sorted ascending, the default one its own way."""
        return self.default_sort is not None and self.default_sort == (column, True)

    def _sortable_columns(self) -> list[str]:
        """The keys of the columns shown that have a sort key, left to right."""
        return [key for key, _ in self.column_spec if key in self.sort_keys]

    def sort_next(self) -> None:
        """Sort by the next sortable column."""
        columns = self._sortable_columns()
        current = self.column_sort[0] if self.column_sort and self.column_sort[0] in columns else columns[-1]
        column = columns[(columns.index(current) + 1) % len(columns)]
        self.sort_by(column, self._first_direction(column))

    def sort_reverse(self) -> None:
        column = self.column_sort[0] if self.column_sort else self._sortable_columns()[0]
        self.sort_by(column, not (self.column_sort and self.column_sort[1]))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """A click on a header sorts by that column; a click on the sorted one reverses it."""
        column = event.column_key.value
        if column not in self.sort_keys:
            return
        event.stop()
        if self.column_sort is not None and self.column_sort[0] == column:
            self.sort_reverse()
        else:
            self.sort_by(column, self._first_direction(column))

    def sort_note(self) -> str:
        """`` · sorted by age ▲ (s, S)`` when not in the default order, for the summary line."""
        if not self.column_sort or self.column_sort == self.default_sort:
            return ""
        column, descending = self.column_sort
        label = dict(self.column_spec).get(column, column)
        return f" · sorted by {label}{_arrow(descending)} (s, S)"

    def mark_sorted(self) -> None:
        """An arrow after the label of the column the rows are sorted by (none on the others)."""
        column, descending = self.column_sort or (None, False)
        for key, label in self.column_spec:
            arrow = _arrow(descending) if key == column else ""
            shown = self.columns.get(ColumnKey(key))
            if shown is None or shown.label.plain == label + arrow:
                continue
            shown.label = Text(label + arrow)
            self.fit_columns()

    def acted_on(self, keys: Iterable[str]) -> None:
        """The console itself just acted on these rows: when they leave the list, the cursor
        moving to a neighbour is what the operator expects (as in a mail client)."""
        self._leaving |= set(keys)

    # -- the cursor, as the operator moves it ----------------------------------------------

    def lose_cursor(self, key: str, why: str) -> None:
        """The cursor left row ``key`` without the operator moving it: an action is refused
        until they do, naming ``key`` and ``why``."""
        self.cursor_lost = key
        self.cursor_lost_why = why

    def _moved(self) -> None:
        self.cursor_lost = None
        self.post_message(self.CursorMoved())

    # The moves by key (up, down, page, top, bottom) are DataTable's, then ``_moved``: set
    # below the class, from ``OPERATOR_MOVES``.

    async def _on_click(self, event: events.Click) -> None:
        # Textual calls DataTable's own _on_click too (a handler per class of the MRO): calling
        # it here as well made one click two (a header click sorted twice, a click on another
        # row selected it and opened it).
        self._moved()

    def cursor_key(self) -> str | None:
        if self.row_count == 0:
            return None
        try:
            return self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value
        except CellDoesNotExist:
            return None

    def cursor_data(self) -> dict[str, Any] | None:
        """The source row under the cursor (None: the table is empty)."""
        key = self.cursor_key()
        return self.rows_data.get(key) if key else None

    # -- marks -------------------------------------------------------------------------------

    def toggle_mark(self, key: str | None = None) -> None:
        key = key or self.cursor_key()
        if key is None or not self.markable:
            return
        if key in self.marks:
            self.marks.discard(key)
        else:
            self.marks.add(key)
        self.update_cell(key, MARK_COLUMN, self._mark_cell(key))

    def clear_marks(self) -> None:
        for key in list(self.marks):
            self.marks.discard(key)
            if key in self._cells:
                self.update_cell(key, MARK_COLUMN, self._mark_cell(key))

    def chosen(self) -> list[str]:
        """The marked rows (in table order), else the row under the cursor."""
        if self.marks:
            return [row.key.value for row in self.ordered_rows if row.key.value in self.marks]
        key = self.cursor_key()
        return [key] if key is not None else []

    def _mark_cell(self, key: str) -> Text:
        return Text(MARK if key in self.marks else " ", style="bold yellow")

    def reset(self) -> None:
        """Drop every row (a new filter or page), keeping the columns."""
        self.clear()
        self._cells.clear()
        self.rows_data.clear()
        self.marks.clear()
        self.cursor_lost = None
        self._arrived = []

    def shown(self, key: str, column: str) -> str:
        """The plain text a cell shows now."""
        return self._cells[key][column]

    def keys(self) -> list[str]:
        """Row keys in display order (``sync`` adds every row with its key)."""
        return [row.key.value for row in self.ordered_rows if row.key.value is not None]


def _safe(value: Any) -> Text:
    """A cell as it is shown: text from the database literally (``safe_text.literal``), on one
    line, ending in … where its column is narrower."""
    text = literal(value)
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def _sortable(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _plain(value: Any) -> str:
    return value.plain if isinstance(value, Text) else str(value)


def _style_changed(table: LiveTable, key: str, column: str, value: Any) -> bool:
    try:
        old = table.get_cell(key, column)
    except CellDoesNotExist:
        return True
    return not isinstance(old, Text) or old.style != value.style or old.spans != value.spans


__all__ = ["MARK", "Column", "LiveTable"]


def _arrow(descending: bool) -> str:
    """The mark of a sorted column, after its label and in the sort note."""
    return " ▼" if descending else " ▲"


# What the operator moves the cursor with (DataTable's actions): LiveTable's own does
# DataTable's, then notes that the operator moved it (``_moved``).
OPERATOR_MOVES = ("cursor_up", "cursor_down", "page_up", "page_down", "scroll_top", "scroll_bottom")


def _operator_move(action: str) -> Callable[[LiveTable], None]:
    def move(table: LiveTable) -> None:
        getattr(super(LiveTable, table), action)()
        table._moved()

    move.__name__ = action
    move.__qualname__ = f"LiveTable.{action}"
    return move


for _move in OPERATOR_MOVES:
    setattr(LiveTable, f"action_{_move}", _operator_move(f"action_{_move}"))
