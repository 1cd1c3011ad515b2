"""One value-to-text formatter for the CLI and the TUI (issue 11, cleaner house): what differs
between a CLI table and a TUI result table is a CellFormat and a width, not a second copy."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from uuid import UUID

from rich.text import Text

from kestrel_console.formatting import (
    RESULTS,
    TABLE,
    cell,
    cut,
    json_line,
    short_json,
    short_time,
    stamp,
    status,
)
from kestrel_console.humanize import duration

AT = datetime(2026, 5, 1, 12, 0, 3, 250000, tzinfo=UTC)


def plain(value: Text | str) -> str:
    return value.plain if isinstance(value, Text) else value


def test_the_cli_table_and_the_tui_results_differ_only_where_their_format_says():
    same = {
        Decimal("1.50"): "1.50",
        42: "42",
        3.5: "3.5",
        "plain": "plain",
        date(2026, 5, 1): "2026-05-01",
        UUID(int=1): "00000000-0000-0000-0000-000000000001",
    }
    for value, text in same.items():
        assert cell(value, TABLE) == cell(value, RESULTS) == text
    # NULL, booleans, times and intervals: each output's own reading.
    assert (plain(cell(None, TABLE)), plain(cell(None, RESULTS))) == ("—", "NULL")
    assert cell(None, RESULTS).style == "dim italic"
    assert (cell(True, TABLE), cell(False, RESULTS)) == ("yes", "false")
    assert (cell(AT, TABLE), cell(AT, RESULTS)) == (short_time(AT), stamp(AT)) == ("2026-05-01 12:00:03Z", stamp(AT))
    assert (cell(timedelta(minutes=3, seconds=4), TABLE), cell(timedelta(minutes=3, seconds=4), RESULTS)) == (
        "3 m 04 s",
        "0:03:04",
    )
    # Column names matter to the CLI's tables only: statuses coloured, *_s columns as durations.
    assert cell("running", TABLE, column="status").style == "bold yellow" == status("running").style
    assert cell("running", RESULTS, column="status") == "running"
    assert (cell(1.25, TABLE, column="took_s"), cell(1.25, RESULTS, column="took_s")) == ("1.2 s", "1.25")
    assert cell(True, TABLE, column="took_s") == "yes"
    # JSON: one line, the same text; the CLI dims it.
    doc = {"pod": "api-1", "n": [1, 2]}
    assert plain(cell(doc, TABLE)) == cell(doc, RESULTS) == '{"pod": "api-1", "n": [1, 2]}'
    assert cell(doc, TABLE).style == "dim cyan"


def test_widths_are_the_callers_and_cut_text_ends_with_an_ellipsis():
    long = "x" * 100
    assert cell(long, TABLE, limit=10) == "x" * 9 + "…" and cell(long, RESULTS, limit=20) == "x" * 19 + "…"
    assert len(plain(cell({"k": long}, TABLE, limit=30))) == 30
    assert cell(bytes(range(40)), RESULTS, limit=12) == "\\x000102030…"
    assert cut("ab", 2) == "ab" and cut("abc", 2) == "a…"


def test_control_characters_are_shown_never_sent():
    assert cell("pay\x1b[2Jroll", TABLE) == cell("pay\x1b[2Jroll", RESULTS) == "pay\\x1b[2Jroll"
    # A multi-line text: the CLI joins its lines, the TUI shows the break.
    assert (cell("a\n  b", TABLE), cell("a\n  b", RESULTS)) == ("a b", "a\\n  b")
    # Shortened JSON escapes as JSON does and stays JSON.
    value = {"c1": "\x9b31m", "bidi": "abc\u202edef", "esc": "\x1b]0;t\x07"}
    line = json_line(value)
    assert json.loads(line) == value
    assert "\\u009b" in line and "\\u202e" in line and "\\u001b" in line
    assert not any(ch in line for ch in "\x1b\x07\x9b\u202e")
    assert short_json(value, 12) == line[:11] + "…"
    assert short_json(None) == "null"


def test_one_duration_formatter_with_each_callers_options():
    # The CLI's tables and sentences: spaced, sub-second precision, signed.
    assert [duration(v) for v in (0.35, 1.25, 42.4, 184, 7500, 273610)] == [
        "350 ms",
        "1.2 s",
        "42 s",
        "3 m 04 s",
        "2 h 05 m",
        "3 d 04 h",
    ]
    assert (duration(None), duration(timedelta(minutes=3, seconds=4)), duration(-0.2)) == ("", "3 m 04 s", "-200 ms")
    assert duration(float("nan")) == "nan"  # an ad-hoc *_s column may hold NaN
    # The TUI's narrow columns: no spaces; an age the clocks made negative reads 0.
    assert [duration(v, compact=True, clamp=True) for v in (0.35, 184, -5.0, None)] == ["350ms", "3m04s", "0ms", ""]
    # The blockers' sentences: whole seconds, '?' when unknown.
    assert [duration(v, subsecond=False, clamp=True, missing="?") for v in (0.35, 9.96, -5.0, None)] == [
        "0 s",
        "10 s",
        "0 s",
        "?",
    ]
    assert cell(184, TABLE, column="age_s") == duration(184)  # *_s columns go through it too
