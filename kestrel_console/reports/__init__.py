"""Saved SQL reports: ``queries/NAME.sql`` files with a header of ``--`` comments (see
``reports.model``). ``model`` holds the report and its errors, ``values`` the parameter types,
``parse`` reads one file, ``discovery`` finds them (the shipped ones are package data),
``run`` binds and runs one, ``csv_export`` writes a result as CSV."""

from __future__ import annotations

from .csv_export import csv_cell, write_csv
from .discovery import discover, find_report, shipped_dir
from .model import REPORT_SUFFIX, SHIPPED_PACKAGE_DIR, Report, ReportError, ReportMetric, ReportNotFound, ReportParam
from .parse import KNOWN_KEYS, METRIC_PREFIX, METRIC_SYNTAX, PARAM_SYNTAX, load_report
from .run import bind_params, describe_params, run_report
from .values import PARAM_TYPES, convert_value

__all__ = [
    "KNOWN_KEYS",
    "METRIC_PREFIX",
    "METRIC_SYNTAX",
    "PARAM_SYNTAX",
    "PARAM_TYPES",
    "REPORT_SUFFIX",
    "SHIPPED_PACKAGE_DIR",
    "Report",
    "ReportError",
    "ReportMetric",
    "ReportNotFound",
    "ReportParam",
    "bind_params",
    "convert_value",
    "csv_cell",
    "describe_params",
    "discover",
    "find_report",
    "load_report",
    "run_report",
    "shipped_dir",
    "write_csv",
]
