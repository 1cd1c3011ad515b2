"""Nothing in the project depends on, or shows, where one machine checked it out (issue 9): no
absolute home, checkout or virtual-environment path in code, tests, docs or sample outputs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".hypothesis",
    "results",
    "build",
    "dist",
}
TEXT = {".py", ".md", ".sql", ".txt", ".toml", ".tcss", ".sh", ".svg", ".cfg", ".ini", ".yml", ".yaml", ".json", ""}
# Spelled in pieces so that this file does not match itself.
MACHINE = re.compile(
    "|".join(
        [
            "/" + "work/",
            "/" + "root/",
            "/" + "home/[A-Za-z0-9_.-]+/",
            "/" + "Users/[A-Za-z0-9_.-]+/",
            r"[A-Za-z0-9_/.-]*/" + r"\.venv/(bin|lib)/",
            "site" + "-packages/",
        ]
    )
)


def project_files() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if parts[0] == ".git" or SKIP_DIRS.intersection(parts[:-1]) or any(p.endswith(".egg-info") for p in parts):
            continue  # a worktree's .git file names where its repository is; that is git's
        if path.is_file() and path.suffix in TEXT:
            out.append(path)
    return out


def test_no_file_names_a_machine_path() -> None:
    checkout = str(ROOT)
    found = []
    for path in project_files():
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if checkout in line or MACHINE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert found == [], "absolute paths of one machine:\n" + "\n".join(found)
