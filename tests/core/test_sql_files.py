"""The format of the statement files beside the modules (kestrel_core/db/sql_files.py), and
that every one in the tree reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel_core.db.sql_files import StatementFileError, Statements, parse_statements, paste

ROOT = Path(__file__).resolve().parents[2]


def test_a_block_is_its_name_its_comment_and_its_statement() -> None:
    found = parse_statements(
        "-- The file's own comment.\n\n"
        "-- name: first\n-- Why it is so.\n-- More why.\nSELECT 1\n  FROM t -- kept: inside the statement\n;\n\n"
        "-- name: second\nUPDATE t SET a = %(a)s WHERE {claim_is_current};\n"
    )
    assert dict(found) == {
        "first": "\nSELECT 1\n  FROM t -- kept: inside the statement\n",
        "second": "\nUPDATE t SET a = %(a)s WHERE {claim_is_current}\n",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", "named twice"),
        ("-- name: a\n-- only a comment\n\n", "is empty"),
        ("SELECT 1;\n-- name: a\nSELECT 2;\n", "before the first"),
    ],
)
def test_a_malformed_file_is_refused_with_its_place(text: str, says: str) -> None:
    with pytest.raises(StatementFileError, match=says):
        parse_statements(text, "x.sql")


def test_every_statement_file_beside_a_module_reads() -> None:
    files = [
        path
        for package in ("kestrel_core", "kestrel_console")
        for path in (ROOT / package).rglob("*.sql")
        if path.with_suffix(".py").exists()
    ]
    for path in files:
        assert parse_statements(path.read_text(encoding="utf-8"), str(path)), f"{path} names no statement"


def test_a_shared_part_is_pasted_at_its_marker_and_a_missing_marker_is_refused() -> None:
    part = parse_statements("-- name: part\n-- A condition.\nr.a = 1\n")["part"]
    assert (
        paste("\nSELECT 1 FROM r WHERE {part} AND {schema}\n", part=part)
        == "\nSELECT 1 FROM r WHERE r.a = 1 AND {schema}\n"
    )
    with pytest.raises(StatementFileError, match="no {part} marker"):
        paste("SELECT 1", part=part)


def test_a_file_reads_as_read_only_attributes_even_for_names_like_get() -> None:
    blocks = Statements(parse_statements("-- name: get\nSELECT 1;\n-- name: items\nSELECT 2;\n"), "x.sql")
    assert (blocks.get, blocks.items, blocks["get"]) == ("\nSELECT 1\n", "\nSELECT 2\n", "\nSELECT 1\n")
    assert list(blocks) == ["get", "items"] and "get" in blocks and len(blocks) == 2
    with pytest.raises(AttributeError, match="no statement 'other'"):
        _ = blocks.other
    with pytest.raises(AttributeError, match="read-only"):
        blocks.get = "SELECT 3"  # type: ignore[misc]
