"""The table of a query's result (ad-hoc SQL and reports), with its row count and time; a row
with an execution id (an ``execution_id`` column, else an ``id`` column) opens that execution
on ``enter``."""

from __future__ import annotations

from typing import Any

from textual.message import Message
from textual.widgets import DataTable

from ... import formatting as fmt
from ...safe_text import literal
from .cut_table import CutTable

# The columns that name an execution, in the order they are looked for.
ID_COLUMNS = ("execution_id", "id")


class ResultsTable(CutTable):
    """While rows or columns are out of sight, a bottom border says so ("↓ more rows · → more
    columns"): at 80x24 a report's last columns were cut without a sign."""

    DEFAULT_CSS = """
    ResultsTable { height: 1fr; }
    ResultsTable.-cut { border-bottom: solid $primary-darken-2; border-subtitle-color: $text-muted; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(zebra_stripes=True, **kwargs)
        self.result: Any = None  # the QueryResult shown (exported as CSV)

    class OpenExecution(Message):
        """``enter`` on a row that names an execution."""

        def __init__(self, execution_id: int) -> None:
            super().__init__()
            self.execution_id = execution_id

    def execution_id_at(self, row: int) -> int | None:
        """The execution id of result row ``row`` (None: the result names none)."""
        if self.result is None or not 0 <= row < len(self.result.rows):
            return None
        columns = list(self.result.columns)
        for name in ID_COLUMNS:
            if name in columns:
                value = self.result.rows[row][columns.index(name)]
                return value if isinstance(value, int) and not isinstance(value, bool) else None
        return None

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        eid = self.execution_id_at(event.coordinate.row)
        if eid is not None:
            event.stop()
            self.post_message(self.OpenExecution(eid))

    def show(self, result: Any) -> None:
        """Replace the table with ``result`` (``.columns``, ``.rows``).

        Each column's width is given, from its header and cells: DataTable otherwise measures
        added rows when it next goes idle, and a result shown from a worker's callback was seen
        (twice in CI) kept at its headers' widths, its cells cut."""
        self.result = result
        self.clear(columns=True)
        labels = [literal(name) for name in result.columns]
        rows = [[literal(fmt.cell(v, fmt.RESULTS)) for v in row] for row in result.rows]
        seen: dict[str, int] = {}
        for i, (name, label) in enumerate(zip(result.columns, labels)):
            seen[name] = seen.get(name, 0) + 1  # duplicate column names (SELECT 1, 1) need distinct keys
            width = max([label.cell_len, *(row[i].cell_len for row in rows)])
            self.add_column(label, key=f"{name}#{seen[name]}", width=width)
        self.add_rows(rows)


def summary(result: Any, max_rows: int) -> str:
    """``12 rows · 3.4 ms`` (noting when the result was cut at ``max_rows``)."""
    n = len(result.rows)
    rows = f"{fmt.count(n)} row{'s' if n != 1 else ''}"
    cut_at_bytes = getattr(result, "cut_at_bytes", None)
    if cut_at_bytes:
        rows += f" (result cut at {cut_at_bytes / 1024 / 1024:g} MB)"
    elif getattr(result, "truncated", False):
        rows += f" (first {max_rows} shown: the result was cut)"
    return f"{rows} · {result.elapsed_ms:.1f} ms"
