"""The executions filter typed after ``/``: the filter language of ``kestrel_console.read.search``
(``status:error workflow:remediate since:2h input.pod=api-1 key:order-7 id:42 free text``),
shared with the CLI's ``list --where``."""

from __future__ import annotations

from ..read.search import KEYS, TEXT_WINDOW, ExecutionFilter, InputMatch, parse_filter, span_seconds

__all__ = ["KEYS", "TEXT_WINDOW", "ExecutionFilter", "InputMatch", "parse_filter", "span_seconds"]
