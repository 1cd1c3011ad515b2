"""A report parameter's value from the text a user typed: each declared type, what a value of
it must look like, and the converter (the driver binds the result; nothing is pasted into SQL)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from psycopg.types.json import Jsonb

from .model import SQL_LITERAL, ReportError, ReportParam

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)"
_UNIT = (
    r"(?:microseconds?|usecs?|us|milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|"
    r"hours?|hrs?|h|days?|d|weeks?|w|months?|mons?|years?|yrs?|y|decades?|decs?|"
    r"centur(?:y|ies)|cent|c|millenni(?:um|a)|mils?)"
)
_CLOCK = r"[-+]?\d+:\d{1,2}(?::\d{1,2}(?:\.\d+)?)?"
_ISO_INTERVAL = r"P(?:\d+(?:[.,]\d+)?[YMWD])*(?:T(?:\d+(?:[.,]\d+)?[HMS])+)?"
# Close to what Postgres accepts ('1 month', '2 days 3 hours', '90 min', '01:30:00', 'P1D',
# '@ 1 hour ago'); anything this lets through that Postgres still rejects is reported by
# run_report with the same message.
_INTERVAL = re.compile(
    rf"^\s*(?:@\s*)?(?:(?:{_NUM}\s*{_UNIT}\b|{_CLOCK}|{_NUM})\s*)+(?:ago\s*)?$|^\s*{_ISO_INTERVAL}\s*$",
    re.IGNORECASE,
)
_TIME_WORDS = {"now", "today", "yesterday", "tomorrow", "epoch", "infinity", "-infinity"}
_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}
_INT_RANGES = {"integer": 2**31, "bigint": 2**63}


def _to_int(kind: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        if not re.fullmatch(r"\s*[-+]?\d+\s*", text):
            raise ValueError(text)
        value = int(text)
        if not -_INT_RANGES[kind] <= value < _INT_RANGES[kind]:
            raise ValueError(text)
        return value

    return convert


def _to_numeric(text: str) -> Decimal:
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(text) from None


def _to_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(text)


def _to_interval(text: str) -> str:
    if not _INTERVAL.match(text) or not re.search(r"\d", text):
        raise ValueError(text)
    return text.strip()


def _to_timestamp(text: str) -> datetime | str:
    if text.strip().lower() in _TIME_WORDS:
        return text.strip().lower()
    return datetime.fromisoformat(text.strip())


def _to_date(text: str) -> date | str:
    if text.strip().lower() in _TIME_WORDS:
        return text.strip().lower()
    return date.fromisoformat(text.strip())


def _to_jsonb(text: str) -> Jsonb:
    return Jsonb(json.loads(text))


# type name as written -> (canonical type, what a value must be, an example, converter)
PARAM_TYPE_SPECS: dict[str, tuple[str, str, str, Callable[[str], Any]]] = {
    "text": ("text", "text", "", str),
    "int": ("integer", "an integer", "", _to_int("integer")),
    "integer": ("integer", "an integer", "", _to_int("integer")),
    "bigint": ("bigint", "an integer", "", _to_int("bigint")),
    "numeric": ("numeric", "a number", "", _to_numeric),
    "float": ("float", "a number", "", float),
    "bool": ("boolean", "a boolean", "true or false", _to_bool),
    "boolean": ("boolean", "a boolean", "true or false", _to_bool),
    "interval": ("interval", "an interval", "like '30 minutes', '2 days', '01:30:00'", _to_interval),
    "timestamptz": ("timestamptz", "a timestamp", "like '2024-05-01 12:00+00' or 'today'", _to_timestamp),
    "timestamp": ("timestamp", "a timestamp", "like '2024-05-01 12:00' or 'today'", _to_timestamp),
    "date": ("date", "a date", "like '2024-05-01' or 'today'", _to_date),
    "jsonb": ("jsonb", "a JSON value", 'like \'{"pod": "api-1"}\'', _to_jsonb),
}
PARAM_TYPES = tuple(sorted(PARAM_TYPE_SPECS))


def convert_value(report_name: str, param: ReportParam, text: str | None) -> Any:
    """``text`` as the Python value bound for ``param`` (None stays None: SQL NULL)."""
    if text is None:
        return None
    quoted = SQL_LITERAL.match(text.strip()) if param.type != "text" else None
    if quoted:  # written like an SQL literal, as in the header: --param "since='2 days'"
        text = quoted.group(1).replace("''", "'")
    convert = PARAM_TYPE_SPECS[param.type][3]
    try:
        return convert(text)
    except (ValueError, TypeError, OverflowError):
        raise ReportError(wrong_type_message(report_name, param, text)) from None


def wrong_type_message(report_name: str, param: ReportParam, text: str) -> str:
    """What to tell the person who gave ``text`` for ``param``: the type it expects, an example."""
    _, expects, example, _ = PARAM_TYPE_SPECS[param.type]
    hint = f" ({example})" if example else ""
    return f"parameter {param.name!r} of report {report_name!r} expects {expects}, got {text!r}{hint}"


# ---------------------------------------------------------------------------------------------
# Parsing a report file
