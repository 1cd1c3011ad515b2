"""The user docs (README.md and docs/*.md) by section, so tests run the examples as written.

A section is found by its heading in one file: ``section("Queues", "docs/flow-control.md")``
is the text under ``## Queues`` there, up to the next heading of its level or above (a page's
``# Title`` is the whole page). Headings inside fenced code blocks are code, not headings.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
_HEADING = re.compile(r"(#{1,6}) (.+?)\s*$")


def doc_files() -> list[Path]:
    """Every user doc: the README, then the pages of docs/."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line number, level, title) of every heading outside fenced code blocks."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.append((number, len(match[1]), match[2]))
    return found


def section(title: str, doc: str = "README.md") -> str:
    """The text of ``doc`` (a path from the repository's root) under the heading ``title``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    marks = headings(text)
    hits = [i for i, (_, _, name) in enumerate(marks) if name == title]
    names = ", ".join(repr(name) for _, _, name in marks)
    assert len(hits) == 1, f"{doc} has {len(hits)} headings {title!r} (its headings: {names})"
    start, level, _ = marks[hits[0]]
    end = next((n for n, lvl, _ in marks[hits[0] + 1 :] if lvl <= level), None)
    return "\n".join(text.splitlines()[start:end]) + "\n"


def blocks(title: str, language: str, doc: str = "README.md") -> list[str]:
    """Every ```language block of the section ``title`` of ``doc``."""
    return [code for lang, code in _BLOCK.findall(section(title, doc)) if lang == language]


def commands(block: str) -> list[str]:
    """The command lines of a bash block, without their trailing comments."""
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line:
            out.append(line)
    return out
