"""Workflow code versions: what an execution started under, so replays stay on that code.

A workflow's version is the ``version=`` given to ``@app.workflow``, else a fingerprint of
its source: editing the function makes a new version, and executions started under the old
one are claimed only by workers that still have it (they drain on the old deployment).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from typing import Any


def fingerprint(fn: Callable[..., Any]) -> str:
    """sha256 of the function's source, first 12 hex digits (of its bytecode when the source
    cannot be read, e.g. defined in a REPL)."""
    try:
        text = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        text = code.co_code + repr(code.co_consts).encode() if code is not None else repr(fn).encode()
    return hashlib.sha256(text).hexdigest()[:12]
