"""Every relative link of the user docs (README.md, docs/*.md, bench/README.md) reaches an existing file, and an
existing heading when it names one (issue 19: the README was split into docs/ pages, whose
links must not drift as text moves); links are relative, and the README links every page."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.readme_blocks import ROOT, doc_files, headings

_FENCED = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:", re.I)
CHECKED = [*doc_files(), ROOT / "bench" / "README.md"]


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a markdown file's headings (a repeated one gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, _, title in headings(path.read_text(encoding="utf-8")):
        base = slug(title)
        found.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return found


def links(path: Path) -> list[str]:
    """The targets of a file's links and images, outside code blocks and code spans."""
    text = _CODE_SPAN.sub("", _FENCED.sub("", path.read_text(encoding="utf-8")))
    return _LINK.findall(text)


def problem(doc: Path, target: str) -> str | None:
    """What is wrong with one link of ``doc``, or None when it resolves."""
    if _SCHEME.match(target):
        return None
    if target.startswith("/"):
        return "is absolute: write it relative to the file"
    file, _, anchor = target.partition("#")
    dest = (doc.parent / unquote(file)).resolve() if file else doc
    if not dest.is_relative_to(ROOT) or not dest.exists():
        return f"names {file}, which does not exist"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"names #{anchor}, no heading of {dest.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("doc", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    found = links(doc)
    assert found, f"{doc.relative_to(ROOT)} links nothing"
    broken = [f"({target}) {why}" for target in found if (why := problem(doc, target))]
    assert broken == [], f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_links_every_docs_page() -> None:
    readme = ROOT / "README.md"
    linked = {(readme.parent / t.partition("#")[0]).resolve() for t in links(readme)}
    pages = {p.resolve() for p in doc_files()[1:]}
    assert pages, "no docs/*.md pages"
    assert pages - linked == set(), "pages of docs/ the README does not link"


def test_a_broken_link_or_anchor_is_named() -> None:
    """The checks above can fail: a missing file, a missing heading, an absolute path."""
    readme = ROOT / "README.md"
    assert problem(readme, "docs/operations.md#worker-processes") is None
    assert "does not exist" in problem(readme, "docs/no-such-page.md")
    assert "no heading" in problem(readme, "docs/operations.md#no-such-heading")
    assert "absolute" in problem(readme, "/docs/operations.md")
    assert slug("Ad-hoc SQL is read-only, in three layers") == "ad-hoc-sql-is-read-only-in-three-layers"
    assert slug("PgBouncer (transaction pooling)") == "pgbouncer-transaction-pooling"
