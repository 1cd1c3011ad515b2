"""The fenced code blocks of one README section, so tests run the examples as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(section: str, language: str) -> list[str]:
    """Every ```language block under the README heading ``## section`` (up to the next ``## ``)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    return [code for lang, code in _BLOCK.findall(body) if lang == language]


def commands(block: str) -> list[str]:
    """The command lines of a bash block, without their trailing comments."""
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line:
            out.append(line)
    return out
