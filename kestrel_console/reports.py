"""Saved SQL reports: ``queries/NAME.sql`` files with a header of ``--`` comments.

A report file looks like::

    -- description: Every run that errored in the last month
    -- param: since interval = '1 month'
    SELECT ... WHERE finished_at > now() - %(since)s::interval

The header is the leading run of comment (and blank) lines. ``-- key: value`` lines in it must
use a known key: ``description`` (repeat it to continue a long one) or ``param``
(``NAME TYPE [= DEFAULT]``, the default written as an SQL literal: ``'1 month'``, ``60``,
``true``, ``null``). Other header comments are free text. The body is one read-only statement
whose parameters are psycopg named placeholders ``%(name)s``, bound by the driver, never pasted
into the text (write a literal ``%`` as ``%%``). Cast each placeholder in the SQL
(``%(since)s::interval``) so Postgres knows its type.

Reports are found in the folder shipped with the package and in the user's folders
(``--queries``, ``$KESTREL_QUERIES``): the first user folder given wins over later ones, and
any user folder wins over the shipped one, so a user can override a shipped report by name.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import IO, Any, Callable

from psycopg.types.json import Jsonb

from kestrel_core import KestrelError, NotFound

SHIPPED_PACKAGE_DIR = "queries_shipped"  # where pyproject force-includes <repo>/queries in the wheel
REPORT_SUFFIX = ".sql"


class ReportError(KestrelError):
    """A report file is malformed, or its parameters were given wrongly."""


class ReportNotFound(NotFound):
    """No report of that name in any folder searched."""


@dataclass(frozen=True)
class ReportParam:
    name: str
    type: str  # canonical: text, integer, bigint, numeric, float, boolean, interval, timestamptz, timestamp, date, jsonb
    default: str | None  # the SQL literal as written ('1 month', 60, null); None = required

    @property
    def required(self) -> bool:
        return self.default is None

    @property
    def default_text(self) -> str | None:
        """The default as a user would type it (``1 month``), None for no default or ``null``."""
        if self.default is None:
            return None
        return _parse_literal(self.default)


@dataclass(frozen=True)
class Report:
    name: str
    description: str
    params: list[ReportParam]
    sql: str  # the body only: what is sent to Postgres
    path: Path
    shipped: bool
    overrides: tuple[Path, ...] = field(default=())  # same-named files this one hides

    def param(self, name: str) -> ReportParam | None:
        return next((p for p in self.params if p.name == name), None)


# ---------------------------------------------------------------------------------------------
# Parameter types: name -> (canonical type, what a value must be, converter from text)
# ---------------------------------------------------------------------------------------------

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
_TYPES: dict[str, tuple[str, str, str, Callable[[str], Any]]] = {
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
    "jsonb": ("jsonb", "a JSON value", "like '{\"pod\": \"api-1\"}'", _to_jsonb),
}
PARAM_TYPES = tuple(sorted(_TYPES))


def convert_value(report_name: str, param: ReportParam, text: str | None) -> Any:
    """``text`` as the Python value bound for ``param`` (None stays None: SQL NULL)."""
    if text is None:
        return None
    quoted = _QUOTED.match(text.strip()) if param.type != "text" else None
    if quoted:  # written like an SQL literal, as in the header: --param "since='2 days'"
        text = quoted.group(1).replace("''", "'")
    convert = _TYPES[param.type][3]
    try:
        return convert(text)
    except (ValueError, TypeError, OverflowError):
        raise ReportError(_wrong_type(report_name, param, text)) from None


def _wrong_type(report_name: str, param: ReportParam, text: str) -> str:
    _, expects, example, _ = _TYPES[param.type]
    hint = f" ({example})" if example else ""
    return f"parameter {param.name!r} of report {report_name!r} expects {expects}, got {text!r}{hint}"


# ---------------------------------------------------------------------------------------------
# Parsing a report file
# ---------------------------------------------------------------------------------------------

_KEY_LINE = re.compile(r"^--\s*([A-Za-z][A-Za-z0-9_-]*)\s*:(.*)$")
_PARAM_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s+([A-Za-z]+)\s*(?:=\s*(.*?))?\s*$")
_PLACEHOLDER = re.compile(r"%%|%\((?P<name>[^)]*)\)(?P<fmt>.?)|%(?P<bare>.?)")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUOTED = re.compile(r"^'((?:[^']|'')*)'$")
KNOWN_KEYS = ("description", "param")
PARAM_SYNTAX = "-- param: NAME TYPE [= DEFAULT]"


def _parse_literal(literal: str) -> str | None:
    """An SQL literal as text: ``'it''s'`` -> ``it's``, ``null`` -> None, ``60`` -> ``60``."""
    quoted = _QUOTED.match(literal)
    if quoted:
        return quoted.group(1).replace("''", "'")
    if literal.lower() == "null":
        return None
    return literal


def load_report(path: Path, shipped: bool = False) -> Report:
    """Parse one report file; ReportError names the file and line of anything malformed."""
    path = Path(path)
    name = path.stem
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read report: {exc}") from None
    lines = text.splitlines()

    def fail(lineno: int, message: str) -> ReportError:
        return ReportError(f"{path}, line {lineno}: {message}")

    description: list[str] = []
    params: list[ReportParam] = []
    param_lines: dict[str, int] = {}
    body_start = len(lines)
    for index, raw in enumerate(lines):
        line = raw.strip()
        if line and not line.startswith("--"):
            body_start = index
            break
        keyed = _KEY_LINE.match(line)
        if not keyed:
            continue  # blank line or free comment
        key, value = keyed.group(1).lower(), keyed.group(2).strip()
        lineno = index + 1
        if key == "description":
            description.append(value)
        elif key == "param":
            param = _parse_param(value, lambda msg: fail(lineno, msg))
            if param.name in param_lines:
                raise fail(lineno, f"parameter {param.name!r} is declared twice "
                                   f"(first on line {param_lines[param.name]})")
            _check_default(name, param, lambda msg: fail(lineno, msg))
            params.append(param)
            param_lines[param.name] = lineno
        else:
            raise fail(lineno, f"unknown header key {key!r}: use one of {', '.join(KNOWN_KEYS)}")

    body = "\n".join(lines[body_start:]).strip()
    if not _strip_comments(body):
        raise ReportError(f"{path}: the report has no SQL after its header")
    used = _placeholders(body, body_start, fail)
    for param_name, lineno in used.items():
        if param_name not in param_lines:
            raise fail(lineno, f"placeholder %({param_name})s has no '-- param: {param_name} TYPE' line "
                               "in the header")
    for param_name, lineno in param_lines.items():
        if param_name not in used:
            raise fail(lineno, f"parameter {param_name!r} is declared but the SQL never uses "
                               f"%({param_name})s")
    return Report(name=name, description=" ".join(d for d in description if d), params=params,
                  sql=body, path=path, shipped=shipped)


def _parse_param(value: str, fail: Callable[[str], ReportError]) -> ReportParam:
    match = _PARAM_LINE.match(value)
    if not match:
        raise fail(f"expected '{PARAM_SYNTAX}', got '-- param: {value}'")
    name, type_name, default = match.group(1), match.group(2).lower(), match.group(3)
    if type_name not in _TYPES:
        raise fail(f"unknown type {match.group(2)!r} for parameter {name!r}: use one of "
                   f"{', '.join(PARAM_TYPES)}")
    if default is not None:
        if default == "":
            raise fail(f"parameter {name!r} has '=' but no default: expected '{PARAM_SYNTAX}'")
        if default.startswith("'") and not _QUOTED.match(default):
            raise fail(f"the default of parameter {name!r} is not a valid SQL literal: {default}")
    return ReportParam(name=name, type=_TYPES[type_name][0], default=default)


def _check_default(report_name: str, param: ReportParam, fail: Callable[[str], ReportError]) -> None:
    try:
        convert_value(report_name, param, param.default_text)
    except ReportError:
        raise fail(f"the default {param.default} of parameter {param.name!r} is not "
                   f"{_TYPES[param.type][1]}") from None


def _placeholders(body: str, first_line: int, fail: Callable[[int, str], ReportError]) -> dict[str, int]:
    """Named placeholders used in the body -> line of first use; refuses what psycopg would."""
    used: dict[str, int] = {}
    for match in _PLACEHOLDER.finditer(body):
        if match.group(0) == "%%":
            continue
        lineno = first_line + body.count("\n", 0, match.start()) + 1
        name = match.group("name")
        if name is None:
            if match.group("bare") in ("s", "b", "t"):
                raise fail(lineno, "positional placeholder %s: name it, like %(since)s, and declare "
                                   "it with a '-- param:' line")
            raise fail(lineno, "a lone '%': write a literal percent sign as %%")
        if not _IDENT.match(name) or match.group("fmt") not in ("s", "b", "t"):
            raise fail(lineno, f"malformed placeholder {match.group(0)!r}: expected %(name)s")
        used.setdefault(name, lineno)
    return used


def _strip_comments(sql: str) -> str:
    lines = (line.split("--", 1)[0] for line in sql.splitlines())
    return re.sub(r"/\*.*?\*/", "", "\n".join(lines), flags=re.S).strip()


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------


def shipped_dir() -> Path | None:
    """The folder of reports shipped with Kestrel: in the wheel, else the repo's ``queries/``."""
    try:
        packaged = resources.files("kestrel_console") / SHIPPED_PACKAGE_DIR
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - unusual loaders
        pass
    repo = Path(__file__).resolve().parent.parent / "queries"
    return repo if repo.is_dir() else None


def _report_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob(f"*{REPORT_SUFFIX}") if p.is_file())


def discover(extra_dirs: Sequence[Path] = (), *, broken: list[ReportError] | None = None) -> dict[str, Report]:
    """Every report by name, user folders first (earlier wins), then the shipped ones.

    A malformed file raises ReportError, unless ``broken`` is a list: then the error is
    appended to it and the name stays taken (a broken user report does not silently fall back
    to the shipped one of the same name). A user folder that does not exist is an error.
    """
    candidates: dict[str, list[tuple[Path, bool]]] = {}
    for folder in extra_dirs:
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ReportError(f"reports folder {folder} does not exist or is not a folder "
                              "(given with --queries or $KESTREL_QUERIES)")
        for path in _report_files(folder):
            candidates.setdefault(path.stem, []).append((path, False))
    shipped = shipped_dir()
    if shipped is not None:
        for path in _report_files(shipped):
            candidates.setdefault(path.stem, []).append((path, True))

    reports: dict[str, Report] = {}
    for name in sorted(candidates):
        (path, is_shipped), *hidden = candidates[name]
        try:
            report = load_report(path, shipped=is_shipped)
        except ReportError as exc:
            if broken is None:
                raise
            broken.append(exc)
            continue
        if hidden:
            report = replace(report, overrides=tuple(p for p, _ in hidden))
        reports[name] = report
    return reports


def find_report(name: str, extra_dirs: Sequence[Path] = ()) -> Report:
    """The report called ``name`` (ReportNotFound lists the available ones)."""
    reports = discover(extra_dirs)
    if name in reports:
        return reports[name]
    available = ", ".join(reports) or "none"
    raise ReportNotFound(f"no report named {name!r}; available: {available}\n"
                         "List them with: kestrel-console report")


# ---------------------------------------------------------------------------------------------
# Binding and running
# ---------------------------------------------------------------------------------------------


def describe_params(report: Report) -> str:
    """``since (interval, default '1 month'), limit (integer, required)``."""
    if not report.params:
        return "it takes no parameters"
    parts = [f"{p.name} ({p.type}, " + ("required)" if p.required else f"default {p.default})")
             for p in report.params]
    return "its parameters: " + ", ".join(parts)


def bind_params(report: Report, given: Mapping[str, str]) -> dict[str, Any]:
    """The values to bind: each given text converted to its type, defaults filled in."""
    for key in given:
        if report.param(key) is None:
            raise ReportError(f"report {report.name!r} has no parameter {key!r}; {describe_params(report)}")
    values: dict[str, Any] = {}
    for param in report.params:
        if param.name in given:
            text = given[param.name]
            values[param.name] = convert_value(report.name, param, None if text is None else str(text))
        elif param.required:
            raise ReportError(f"report {report.name!r} needs parameter {param.name!r} ({param.type}): "
                              f"give it as --param {param.name}=VALUE")
        else:
            values[param.name] = convert_value(report.name, param, param.default_text)
    return values


# Postgres refused to cast a value: invalid text representation, datetime format or range.
_CAST_SQLSTATES = {"22P02", "22007", "22008", "22015", "22003"}


def run_report(
    conn: Any, report: Report, params: Mapping[str, Any], *, schema: str = "kestrel",
    timeout_ms: float = 10_000, max_rows: int = 1000, max_bytes: int | None = None,
) -> Any:
    """Run the report read-only (``adhoc.run_read_only``) with its bound parameters.

    ``params`` come from ``bind_params``. A value Postgres cannot cast to the parameter's type
    raises ReportError naming the parameter; other failures propagate (QueryRefused,
    QueryTimeout, QueryFailed).
    """
    from .adhoc import DEFAULT_MAX_BYTES, QueryFailed, run_read_only

    missing = [p.name for p in report.params if p.name not in params]
    if missing:
        raise ReportError(f"report {report.name!r}: no value bound for {', '.join(missing)} "
                          "(use bind_params)")
    try:
        return run_read_only(conn, report.sql, dict(params), schema=schema, timeout_ms=timeout_ms,
                             max_rows=max_rows, max_bytes=max_bytes or DEFAULT_MAX_BYTES, check=True,
                             placeholders=True)
    except QueryFailed as exc:
        bad = _cast_failure(report, params, exc)
        if bad is not None:
            raise bad from None
        raise


def _cast_failure(report: Report, params: Mapping[str, Any], exc: BaseException) -> ReportError | None:
    """The parameter whose value Postgres could not cast, if that is what failed."""
    cause = exc.__cause__ or exc.__context__
    sqlstate = getattr(cause, "sqlstate", None) or getattr(exc, "sqlstate", None)
    if sqlstate not in _CAST_SQLSTATES:
        return None
    message = str(cause or exc)
    for param in report.params:
        value = params.get(param.name)
        if isinstance(value, str) and f'"{value}"' in message:
            return ReportError(_wrong_type(report.name, param, value))
    return None


# ---------------------------------------------------------------------------------------------
# CSV export (the TUI's export and the CLI's --format csv both use this)
# ---------------------------------------------------------------------------------------------


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
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}" + (f".{value.microseconds:06d}".rstrip("0") if value.microseconds else "")
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
