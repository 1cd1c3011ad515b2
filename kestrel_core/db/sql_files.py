"""Named statements kept in ``.sql`` files beside the modules that run them (the engine's and
the console's: one reader, one format).

A module ``claim.py`` keeps its statements in ``claim.sql``, so that a DBA reads every
statement the engine runs as SQL, each under its name and the comment that says why::

    -- name: claim_ready
    -- Why this statement looks the way it does (comment lines right after the name).
    WITH picked AS (
        SELECT ...
    )
    SELECT ...;

A block runs from its ``-- name:`` line to the next one; the comment lines right after the
name are its documentation, the rest is the statement (its final ``;`` dropped, so a block
also pastes into psql as it stands). Lines before the first block are the file's own comment.
Statements keep the engine's rendering markers (``{schema}``, ``{claim_is_current}``...:
``statements.render``) and bound parameters (``%(name)s``). A statement built on a part it
shares with others names that part by a marker too (``{take_picked}``, ``{place_one}``: a block
of a statements file, whose comment says which), filled at import by ``paste``; nothing here
composes SQL with anything but the engine's own blocks.

A module reads its file once, ``SQL = statements_beside(__file__)``, and names a statement where
it runs it, ``SQL.claim_ready``: the name in the file is the name in the code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType

_NAME = re.compile(r"^-- name: ([a-z][a-z0-9_]*)\s*$")


class StatementFileError(Exception):
    """A statements file that does not follow the format above (a packaging or editing error)."""


def parse_statements(text: str, source: str = "<text>") -> Mapping[str, str]:
    """Name -> statement text of one statements file."""
    found: dict[str, str] = {}
    name: str | None = None
    body: list[str] = []
    in_doc = False

    def close() -> None:
        if name is None:
            return
        statement = "\n".join(body).strip("\n").rstrip()
        statement = statement.removesuffix(";").rstrip()
        if not statement:
            raise StatementFileError(f"{source}: statement {name!r} is empty")
        found[name] = "\n" + statement + "\n"

    for number, line in enumerate(text.splitlines(), start=1):
        match = _NAME.match(line)
        if match:
            close()
            name, body, in_doc = match.group(1), [], True
            if name in found:
                raise StatementFileError(f"{source}:{number}: statement {name!r} is named twice")
            continue
        if name is None:
            if line.strip() and not line.startswith("--"):
                raise StatementFileError(f"{source}:{number}: SQL before the first '-- name:' line")
            continue
        if in_doc and line.startswith("--"):
            continue
        in_doc = False
        body.append(line)
    close()
    return MappingProxyType(found)


class Statements:
    """The statements of one file, read-only, each an attribute under its block's name. No
    method of its own (a block may be named ``get`` or ``items``): ``in``, ``[]`` and iteration
    over the names are all it adds."""

    __slots__ = ("_by_name", "_source")
    _by_name: Mapping[str, str]
    _source: str

    def __init__(self, by_name: Mapping[str, str], source: str) -> None:
        object.__setattr__(self, "_by_name", MappingProxyType(dict(by_name)))
        object.__setattr__(self, "_source", source)

    def __getattr__(self, name: str) -> str:
        try:
            return self._by_name[name]
        except KeyError:
            raise AttributeError(f"{self._source} has no statement {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("statements are read-only")

    def __getitem__(self, name: str) -> str:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


@cache
def _read(path: Path) -> Statements:
    return Statements(parse_statements(path.read_text(encoding="utf-8"), str(path)), str(path))


def paste(statement: str, **parts: str) -> str:
    """``statement`` with each ``{name}`` marker of ``parts`` replaced by that part: named blocks
    of the engine's own files (never data), pasted at import. Every part must be used."""
    for name, part in parts.items():
        marker = "{" + name + "}"
        if marker not in statement:
            raise StatementFileError(f"no {marker} marker to paste {name!r} into")
        statement = statement.replace(marker, part.strip("\n"))
    return statement


def statements_beside(module_file: str) -> Statements:
    """The statements of the ``.sql`` file beside ``module_file`` (pass ``__file__``), read once."""
    return _read(Path(module_file).with_suffix(".sql"))
