"""Parsing one report file: its header (``-- description:``, ``-- param:``, ``-- metric:``) and
its body's named placeholders; anything malformed is a ReportError naming the file and line."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from .model import SQL_LITERAL, Report, ReportError, ReportMetric, ReportParam
from .values import PARAM_TYPE_SPECS, PARAM_TYPES, convert_value

_KEY_LINE = re.compile(r"^--\s*([A-Za-z][A-Za-z0-9_-]*)\s*:(.*)$")
_PARAM_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s+([A-Za-z]+)\s*(?:=\s*(.*?))?\s*$")
_PLACEHOLDER = re.compile(r"%%|%\((?P<name>[^)]*)\)(?P<fmt>.?)|%(?P<bare>.?)")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KNOWN_KEYS = ("description", "param", "metric")
PARAM_SYNTAX = "-- param: NAME TYPE [= DEFAULT]"
METRIC_SYNTAX = "-- metric: gauge kestrel_report_NAME [value=COLUMN] [labels=COLUMN,...]"
# A report's gauges live under their own prefix: no report can shadow the endpoint's metrics.
METRIC_PREFIX = "kestrel_report_"
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


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
    metrics: list[ReportMetric] = []
    metric_lines: dict[str, int] = {}
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
            param = _parse_param(value, functools.partial(fail, lineno))
            if param.name in param_lines:
                raise fail(
                    lineno, f"parameter {param.name!r} is declared twice (first on line {param_lines[param.name]})"
                )
            _check_default(name, param, functools.partial(fail, lineno))
            params.append(param)
            param_lines[param.name] = lineno
        elif key == "metric":
            metric = _parse_metric(value, functools.partial(fail, lineno))
            if metric.name in metric_lines:
                raise fail(
                    lineno, f"metric {metric.name!r} is declared twice (first on line {metric_lines[metric.name]})"
                )
            metrics.append(metric)
            metric_lines[metric.name] = lineno
        else:
            raise fail(lineno, f"unknown header key {key!r}: use one of {', '.join(KNOWN_KEYS)}")

    body = "\n".join(lines[body_start:]).strip()
    if not _strip_comments(body):
        raise ReportError(f"{path}: the report has no SQL after its header")
    used = _placeholders(body, body_start, fail)
    for param_name, lineno in used.items():
        if param_name not in param_lines:
            raise fail(lineno, f"placeholder %({param_name})s has no '-- param: {param_name} TYPE' line in the header")
    for param_name, lineno in param_lines.items():
        if param_name not in used:
            raise fail(lineno, f"parameter {param_name!r} is declared but the SQL never uses %({param_name})s")
    if metrics:
        for param in params:
            if param.required:
                raise fail(
                    param_lines[param.name],
                    f"parameter {param.name!r} has no default, but the report declares a metric "
                    "(it runs at every scrape with its defaults): give it one",
                )
    return Report(
        name=name,
        description=" ".join(d for d in description if d),
        params=params,
        sql=body,
        path=path,
        shipped=shipped,
        metrics=tuple(metrics),
    )


def _parse_metric(value: str, fail: Callable[[str], ReportError]) -> ReportMetric:
    """``gauge NAME [value=COLUMN] [labels=COLUMN,...]``."""
    words = value.split()
    if len(words) < 2:
        raise fail(f"expected '{METRIC_SYNTAX}', got '-- metric: {value}'")
    kind, name, options = words[0].lower(), words[1], words[2:]
    if kind != "gauge":
        raise fail(
            f"metric type {words[0]!r}: a report can only be a gauge (its numbers may go down; "
            f"a counter must never), expected '{METRIC_SYNTAX}'"
        )
    if not _METRIC_NAME.match(name) or not name.startswith(METRIC_PREFIX) or name == METRIC_PREFIX:
        raise fail(f"metric name {name!r}: give a Prometheus name starting with {METRIC_PREFIX!r}")
    column: str | None = None
    labels: tuple[str, ...] = ()
    seen: set[str] = set()
    for option in options:
        key, eq, rest = option.partition("=")
        if not eq or key not in ("value", "labels") or key in seen:
            raise fail(f"unexpected {option!r} in the metric line: expected '{METRIC_SYNTAX}'")
        seen.add(key)
        names = rest.split(",")
        bad = [n for n in names if not _IDENT.match(n)]
        if bad or not rest:
            raise fail(f"{key}={rest}: give column names (letters, digits, _), comma-separated")
        if key == "value":
            if len(names) != 1:
                raise fail(f"value={rest}: give one column")
            column = names[0]
        else:
            if len(set(names)) != len(names):
                raise fail(f"labels={rest}: a column is named twice")
            labels = tuple(names)
    if column is not None and column in labels:
        raise fail(f"column {column!r} is both the value and a label")
    return ReportMetric(kind=kind, name=name, value=column, labels=labels)


def _parse_param(value: str, fail: Callable[[str], ReportError]) -> ReportParam:
    match = _PARAM_LINE.match(value)
    if not match:
        raise fail(f"expected '{PARAM_SYNTAX}', got '-- param: {value}'")
    name, type_name, default = match.group(1), match.group(2).lower(), match.group(3)
    if type_name not in PARAM_TYPE_SPECS:
        raise fail(f"unknown type {match.group(2)!r} for parameter {name!r}: use one of {', '.join(PARAM_TYPES)}")
    if default is not None:
        if default == "":
            raise fail(f"parameter {name!r} has '=' but no default: expected '{PARAM_SYNTAX}'")
        if default.startswith("'") and not SQL_LITERAL.match(default):
            raise fail(f"the default of parameter {name!r} is not a valid SQL literal: {default}")
    return ReportParam(name=name, type=PARAM_TYPE_SPECS[type_name][0], default=default)


def _check_default(report_name: str, param: ReportParam, fail: Callable[[str], ReportError]) -> None:
    try:
        convert_value(report_name, param, param.default_text)
    except ReportError:
        raise fail(
            f"the default {param.default} of parameter {param.name!r} is not {PARAM_TYPE_SPECS[param.type][1]}"
        ) from None


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
                raise fail(
                    lineno, "positional placeholder %s: name it, like %(since)s, and declare it with a '-- param:' line"
                )
            raise fail(lineno, "a lone '%': write a literal percent sign as %%")
        if not _IDENT.match(name) or match.group("fmt") not in ("s", "b", "t"):
            raise fail(lineno, f"malformed placeholder {match.group(0)!r}: expected %(name)s")
        used.setdefault(name, lineno)
    return used


def _strip_comments(sql: str) -> str:
    lines = (line.split("--", 1)[0] for line in sql.splitlines())
    return re.sub(r"/\*.*?\*/", "", "\n".join(lines), flags=re.S).strip()
