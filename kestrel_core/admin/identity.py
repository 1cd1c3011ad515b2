"""Who is acting: the name an audited action records when the caller gives none."""

from __future__ import annotations

import getpass
import os


def default_operator() -> str:
    """Who is acting when no name is given: ``$USER``, else the OS login name."""
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:  # no passwd entry (containers)
        return "unknown"
