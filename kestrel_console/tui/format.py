"""How values look on screen: compact ages and durations, coloured statuses, highlighted JSON.

Text from the database goes through ``safe_text`` here: control characters are shown as
escapes, never sent to the terminal."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

from .. import style
from ..humanize import duration
from ..safe_text import json_safe, visible

STATUS_STYLES = style.STATUS_STYLES  # one palette with the CLI
SYNTAX_THEME = "monokai"


def seconds(value: float | None) -> str:
    """A duration in the fewest characters that stay readable: 850ms, 42s, 3m04s, 2h05m, 3d04h."""
    return "" if value is None else duration(max(value, 0.0), compact=True)


def when(value: datetime | None) -> str:
    """A timestamp as local wall-clock time (date shown when it is not today)."""
    if value is None:
        return ""
    local = value.astimezone() if value.tzinfo else value
    if local.date() == datetime.now().date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M")


def stamp(value: datetime) -> str:
    """A timestamp in a result table: local wall-clock time to the second, always dated (a
    report's rows span days). CSV export keeps the exact value."""
    local = value.astimezone() if value.tzinfo else value
    return local.strftime("%Y-%m-%d %H:%M:%S")


def status(value: str | None) -> Text:
    return Text(value or "", style=STATUS_STYLES.get(value or "", ""))


def count(value: int | None) -> str:
    """A count with thin thousands separators (exact: never rounded)."""
    return f"{int(value or 0):,}"


def short_json(value: Any, width: int = 60) -> str:
    """One line of JSON, cut to ``width`` characters."""
    if value is None:
        return ""
    text = json_safe(json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": ")))
    return text if len(text) <= width else text[: width - 1] + "…"


def json_text(value: Any) -> str:
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


def cell(value: Any, width: int = 80) -> str | Text:
    """A result-table cell: NULL dim, JSON on one line, times in ISO 8601."""
    if value is None:
        return Text("NULL", style="dim italic")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return stamp(value)
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    if isinstance(value, (dict, list)):
        return short_json(value, width)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return "\\x" + bytes(value).hex()[: width]
    text = visible(str(value))
    return text if len(text) <= width else text[: width - 1] + "…"
