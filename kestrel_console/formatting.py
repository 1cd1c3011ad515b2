"""How values read as text, for the CLI's tables and the TUI's screens alike: times, counts,
statuses, JSON on one line or pretty, and the cells of rows from the database (durations: the
one ``humanize.duration``, whose options each caller picks).

One formatter, two outputs: what differs between a CLI table and a TUI result table (how NULL,
booleans, times and intervals read, whether a column's name says it is a status or a duration)
is a ``CellFormat`` passed in (``TABLE`` for the CLI, ``RESULTS`` for the TUI), and how wide a
cell may be is the caller's ``limit``.

Text from the database goes through ``safe_text`` here: control characters are shown as
escapes, never sent to the terminal. JSON keeps JSON's own escapes (``\\u001b``), so shortened
JSON is still JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

from . import style
from .humanize import duration
from .reports import csv_cell
from .safe_text import json_safe, visible

STATUS_STYLES = style.STATUS_STYLES  # one palette for the CLI and the TUI (style.py)
SYNTAX_THEME = "monokai"

# -- times, counts, statuses ------------------------------------------------------------------


def short_time(value: datetime) -> str:
    """'2024-05-01 12:00:03Z' (UTC) or '2024-05-01 14:00:03+02:00': seconds, one space."""
    text = value.isoformat(sep=" ", timespec="seconds")
    offset = value.utcoffset()
    if offset is not None and not offset:
        text = text[: -len("+00:00")] + "Z"
    return text


def when(value: datetime | None, *, short: bool = False) -> str:
    """A timestamp as local wall-clock time (date shown when it is not today); ``short``: the
    date without its year when it is this year ('12-06 22:04', a narrow column)."""
    if value is None:
        return ""
    local = value.astimezone() if value.tzinfo else value
    today = datetime.now().date()
    if local.date() == today:
        return local.strftime("%H:%M:%S")
    if short and local.year == today.year:
        return local.strftime("%m-%d %H:%M")
    return local.strftime("%Y-%m-%d %H:%M")


def stamp(value: datetime) -> str:
    """A timestamp in a result table: local wall-clock time to the second, always dated (a
    report's rows span days). CSV export keeps the exact value."""
    local = value.astimezone() if value.tzinfo else value
    return local.strftime("%Y-%m-%d %H:%M:%S")


def count(value: int | None) -> str:
    """A count with thousands separators (exact: never rounded)."""
    return f"{int(value or 0):,}"


def status(value: str | None) -> Text:
    """A status or outcome as a word in its colour."""
    return Text(value or "", style=STATUS_STYLES.get(value or "", ""))


# -- text and JSON ---------------------------------------------------------------------------


def cut(text: str, limit: int, *, join_lines: bool = True) -> str:
    """``text`` on one line, control characters escaped, cut to ``limit`` characters with a
    trailing ellipsis. ``join_lines`` joins the lines of a multi-line text with spaces;
    otherwise a line break shows as ``\\n``."""
    if join_lines and "\n" in text:
        text = " ".join(text.split())
    text = visible(text)
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def json_line(value: Any) -> str:
    """A JSON value on one line, escaped for a terminal (still valid JSON)."""
    return json_safe(json.dumps(value, ensure_ascii=False, default=str))


def short_json(value: Any, limit: int = 60) -> str:
    """One line of JSON, cut to ``limit`` characters."""
    return cut(json_line(value), limit)


def json_text(value: Any) -> str:
    """A JSON value pretty-printed, escaped for a terminal."""
    return json_safe(json.dumps(value, ensure_ascii=False, default=str, indent=2))


def json_view(value: Any) -> RenderableType:
    """A JSON value, pretty-printed and syntax-highlighted."""
    if value is None:
        return Text("null", style="dim")
    return Syntax(json_text(value), "json", theme=SYNTAX_THEME, word_wrap=True, background_color="default")


def error_view(error: str | None) -> RenderableType:
    """An error message; a Python traceback is highlighted as one."""
    if not error:
        return Text("no error", style="dim")
    error = visible(error, newlines=True)
    if "Traceback (most recent call last)" in error:
        return Syntax(error, "pytb", theme=SYNTAX_THEME, word_wrap=True, background_color="default")
    return Text(error, style="red")


def json_value(value: Any) -> Any:
    """A value as JSON for scripts: datetimes ISO 8601, numbers as numbers, intervals as text."""
    if isinstance(value, float) and not math.isfinite(value):
        # NaN and infinities are not JSON numbers: spelled as Postgres prints them
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() and abs(value) < 2**63 else float(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, UUID):
        return str(value)
    return csv_cell(value)  # timedelta, bytes, anything else: the CSV text


# -- cells of rows from the database ---------------------------------------------------------


@dataclass(frozen=True)
class CellFormat:
    """How one output writes the values a cell can hold."""

    null: Text
    true: str
    false: str
    timestamp: Callable[[datetime], str]
    interval: Callable[[timedelta], str]
    json_style: str = ""  # "" : JSON as plain text
    join_lines: bool = True  # a multi-line text on one line, joined by spaces (else "\n")
    status_columns: frozenset[str] = frozenset()  # coloured as statuses
    duration_suffix: str | None = None  # columns of seconds ending so read as durations


# The CLI's tables: for the eye (durations human, statuses coloured, times in UTC).
TABLE = CellFormat(
    null=Text("—", style="dim"),
    true="yes",
    false="no",
    timestamp=short_time,
    interval=duration,
    json_style="dim cyan",
    status_columns=frozenset({"status", "outcome", "decision", "from_status"}),
    duration_suffix="_s",
)
# The TUI's result tables (SQL, reports): close to what Postgres returned, times local.
RESULTS = CellFormat(
    null=Text("NULL", style="dim italic"), true="true", false="false", timestamp=stamp, interval=str, join_lines=False
)


def cell(value: Any, how: CellFormat, *, column: str = "", limit: int = 80) -> Text | str:
    """One value from the database as a cell of ``how``'s tables, at most ``limit`` wide."""
    if value is None:
        return how.null.copy()
    if column in how.status_columns and isinstance(value, str):
        return Text(value, style=STATUS_STYLES.get(value, ""))
    if isinstance(value, bool):
        return how.true if value else how.false
    if isinstance(value, timedelta):
        return how.interval(value)
    if how.duration_suffix and column.endswith(how.duration_suffix) and isinstance(value, (int, float, Decimal)):
        return duration(float(value))
    if isinstance(value, datetime):
        return how.timestamp(value)
    if isinstance(value, (dict, list)):
        text = short_json(value, limit)
        return Text(text, style=how.json_style) if how.json_style else text
    return cut(csv_cell(value), limit, join_lines=how.join_lines)
