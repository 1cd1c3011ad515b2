"""CSV export of a query result (the TUI's export and the CLI's ``--format csv`` both use this)."""

from __future__ import annotations

import csv
import json
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import IO, Any


def csv_cell(value: Any) -> str:
    """One value as CSV text: NULL empty, JSON as JSON, times in ISO 8601."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return _interval_text(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, (bytes, memoryview)):
        return "\\x" + bytes(value).hex()
    return str(value)


def _interval_text(value: timedelta) -> str:
    """Like Postgres prints an interval: ``2 days 03:04:05.5``."""
    sign = "-" if value < timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}" + (
        f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
    )
    days = f"{value.days} day{'s' if value.days != 1 else ''} " if value.days else ""
    return f"{sign}{days}{clock}"


def write_csv(result: Any, target: Path | str | IO[str]) -> int:
    """Write a QueryResult (``.columns``, ``.rows``) as CSV with a header row; returns rows written.

    ``target`` is a path (created or replaced) or an open text stream (e.g. sys.stdout).
    """
    if isinstance(target, (str, Path)):
        with open(target, "w", newline="", encoding="utf-8") as handle:
            return write_csv(result, handle)
    writer = csv.writer(target, lineterminator="\n")
    writer.writerow(list(result.columns))
    count = 0
    for row in result.rows:
        writer.writerow([csv_cell(v) for v in row])
        count += 1
    return count
