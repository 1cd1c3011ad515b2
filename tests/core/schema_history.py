"""Which function files an earlier version of the schema had, for tests that build one (a
populated schema at version N, then migrated): each file's header names the migration that
created its function ("created by migration 0040", "migration 0015 made it"); a file created
after N is left out, its function made, if at all, by the migrations as they were then."""

from __future__ import annotations

import re

from kestrel_core.db.migrate import function_files

CREATED = re.compile(r"created (?:by|with) migration (\d{4})|migration (\d{4}) made")


def created_in(text: str) -> int | None:
    """The migration that created the function of a file's ``text`` (its first two lines say)."""
    match = CREATED.search(" ".join(text.splitlines()[:2]))
    return int(match.group(1) or match.group(2)) if match else None


def created_after(version: int) -> set[str]:
    """The function files a schema of ``version`` did not have."""
    return {f.name for f in function_files() if (created_in(f.text) or 0) > version}
