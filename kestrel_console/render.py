"""Printing rows for people (Rich tables) and for scripts (JSON, CSV).

How each value reads is ``formatting``'s job (the TUI's too); this module lays rows out.

``emit`` is the one way commands print rows. ``json`` is an array of objects, one per row, keys
= column names, datetimes in ISO 8601; ``csv`` has a header row and writes values like
``reports.csv_cell`` (the TUI's CSV export), so both exports agree. Only ``table`` is made for
the eye: durations human-readable, statuses coloured, long JSON and text cut with an ellipsis.

Text from the database never reaches a terminal raw (``safe_text``): tables show control
characters as escapes (``\x1b``); ``json`` escapes them as JSON does (``\u001b``, the value
unchanged); ``csv`` writes values exactly (it is data, usually redirected to a file) except when
stdout is a terminal, where its cells are escaped like a table's.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .formatting import TABLE, cell, json_value
from .reports import csv_cell
from .safe_text import json_safe, visible

FORMATS = ("table", "json", "csv")

# Columns holding seconds that tables show as durations ("1.2 s", "3 m 04 s"): see TABLE.
DURATION_SUFFIX = TABLE.duration_suffix or ""
MAX_CELL = 60  # characters of JSON or text shown in a table cell
SHORT_COLUMN = 24  # a column whose cells are all this short never wraps


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of FORMATS, else ValueError (the CLI turns it into exit 2)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return fmt


def _as_text(value: Text | str) -> Text:
    return value if isinstance(value, Text) else Text(value)


def _header(column: str) -> str:
    if column.endswith(DURATION_SUFFIX) and len(column) > len(DURATION_SUFFIX):
        return visible(column[: -len(DURATION_SUFFIX)])
    return visible(column)


# -- rows ------------------------------------------------------------------------------------


def _normalise(rows: Sequence[Any], columns: Sequence[str] | None) -> tuple[list[str], list[tuple]]:
    """(columns, rows as tuples) from dict rows or from tuple rows plus column names."""
    if columns is None:
        if rows and isinstance(rows[0], Mapping):
            columns = list(rows[0].keys())
        else:
            columns = []
    columns = list(columns)
    out = []
    for row in rows:
        if isinstance(row, Mapping):
            out.append(tuple(row.get(c) for c in columns))
        else:
            out.append(tuple(row))
    return columns, out


PIPE_WIDTH = 160  # table width when stdout is not a terminal and $COLUMNS is unset


def console_for(file: IO[str] | None = None) -> Console:
    """A Rich console on ``file`` (stdout by default): the terminal's width, else $COLUMNS,
    else PIPE_WIDTH (Rich would squeeze tables to 80 columns in a pipe)."""
    out = file or sys.stdout
    width = None
    isatty = getattr(out, "isatty", None)
    if not (callable(isatty) and isatty()) and not os.environ.get("COLUMNS"):
        width = PIPE_WIDTH
    return Console(file=out, highlight=False, soft_wrap=False, width=width)


def emit(
    rows: Sequence[Any],
    columns: Sequence[str] | None = None,
    fmt: str = "table",
    *,
    file: IO[str] | None = None,
    title: str | None = None,
    empty: str = "(no rows)",
    console: Console | None = None,
    headers: Mapping[str, str] | None = None,
    max_cell: int = MAX_CELL,
) -> None:
    """Print ``rows`` (dicts, or tuples with ``columns``) as a table, JSON or CSV.

    ``columns`` picks and orders the columns of dict rows; for ``json`` and ``csv`` they are
    exactly the output's keys / header. ``headers`` renames columns in tables only;
    ``max_cell`` is where a table cuts long text and JSON.
    """
    check_format(fmt)
    columns, values = _normalise(rows, columns)
    out = file or sys.stdout
    if fmt == "json":
        data = [{c: json_value(v) for c, v in zip(columns, row)} for row in values]
        out.write(json_safe(json.dumps(data, ensure_ascii=False, indent=2)))
        out.write("\n")
        return
    if fmt == "csv":
        isatty = getattr(out, "isatty", None)
        shown = visible if callable(isatty) and isatty() else str
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([shown(c) for c in columns])
        for row in values:
            writer.writerow([shown(csv_cell(v)) for v in row])
        return
    con = console or console_for(out)
    if not values:
        if title:
            con.print(Text(visible(title), style="bold"))
        elif columns:  # an empty result still shows what its columns are
            con.print(Text("  ".join((headers or {}).get(c) or _header(c) for c in columns), style="bold"))
        con.print(Text(empty, style="dim"))
        return
    table = Table(
        title=title and visible(title),
        title_justify="left",
        title_style="bold",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    # Text, never markup: a value holding "[/x]" is printed as it is.
    cells = [[_as_text(cell(v, TABLE, column=c, limit=max_cell)) for c, v in zip(columns, row)] for row in values]
    for i, column in enumerate(columns):
        present = [row[i] for row in values if row[i] is not None]
        numeric = (
            bool(present)
            and all(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in present)
            and not column.endswith(DURATION_SUFFIX)
        )
        label = (headers or {}).get(column) or _header(column)
        longest = max([len(label)] + [len(row[i].plain) for row in cells])
        # Short columns (ids, names, statuses, times) keep their width; when the terminal is
        # too narrow the long ones (text, JSON) wrap.
        short = longest <= SHORT_COLUMN
        table.add_column(
            Text(label),
            justify="right" if numeric else "left",
            overflow="fold",
            no_wrap=short,
            min_width=longest if short else min(longest, 16),
        )
    for texts in cells:
        table.add_row(*texts)
    con.print(table)
    if Measurement.get(con, con.options.update_width(10**6), table).minimum > con.width:
        sys.stderr.write(
            f"(the table is wider than the terminal's {con.width} columns and is cut "
            "on the right: widen it, or use --format csv or json)\n"
        )


ACTION_COLUMNS = ["at", "actor", "db_user", "action", "step_id", "comment", "from_status"]


def render_actions(
    actions: Sequence[Mapping[str, Any]], *, console: Console | None = None, file: IO[str] | None = None
) -> None:
    """The operator actions taken on one execution: the name each operator gave (actor) and
    the database role Postgres authenticated (db_user). Nothing is printed when there are none."""
    if not actions:
        return
    con = console or console_for(file)
    con.print()
    emit(
        actions,
        ACTION_COLUMNS,
        "table",
        console=con,
        title="Operator actions",
        headers={"actor": "name given", "db_user": "db role", "step_id": "step", "from_status": "was"},
    )
