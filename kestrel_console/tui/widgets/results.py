"""The table of a query's result (ad-hoc SQL and reports), with its row count and time."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

from ...safe_text import literal
from ... import formatting as fmt


class ResultsTable(DataTable):
    DEFAULT_CSS = """
    ResultsTable { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(zebra_stripes=True, **kwargs)
        self.result: Any = None  # the QueryResult shown (exported as CSV)

    def show(self, result: Any) -> None:
        """Replace the table with ``result`` (``.columns``, ``.rows``)."""
        self.result = result
        self.clear(columns=True)
        names = list(result.columns)
        seen: dict[str, int] = {}
        for name in names:  # duplicate column names (SELECT 1, 1) need distinct keys
            seen[name] = seen.get(name, 0) + 1
            self.add_column(literal(name), key=f"{name}#{seen[name]}")
        self.add_rows([literal(fmt.cell(v, fmt.RESULTS)) for v in row] for row in result.rows)


def summary(result: Any, max_rows: int) -> str:
    """``12 rows · 3.4 ms`` (noting when the result was cut at ``max_rows``)."""
    n = len(result.rows)
    rows = f"{n} row{'s' if n != 1 else ''}"
    cut_at_bytes = getattr(result, "cut_at_bytes", None)
    if cut_at_bytes:
        rows += f" (result cut at {cut_at_bytes / 1024 / 1024:g} MB)"
    elif getattr(result, "truncated", False):
        rows += f" (first {max_rows} shown: the result was cut)"
    return f"{rows} · {result.elapsed_ms:.1f} ms"
