"""Describing what a step or a workflow raised, in text Postgres stores.

Whatever an application's exception does, describing it never raises: its ``str()`` may itself
raise (or return no string), and its text may hold a NUL, which Postgres refuses in a text
column, or a lone surrogate, which is not UTF-8. Either used to fail the engine's write of the
error, and the execution was replayed every lease, forever.
"""

from __future__ import annotations

import traceback

__all__ = ["describe_exception", "exception_head", "safe_str", "storable", "unstorable"]


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or ``<Type: str() raised Error>`` when that raises."""
    try:
        return str(exc)
    except BaseException as failure:  # an application's __str__ may raise anything
        return f"<{type(exc).__name__}: str() raised {type(failure).__name__}>"


def exception_head(exc: BaseException) -> str:
    """``Type: message`` (the fallback of ``safe_str`` alone when the message cannot be had)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except BaseException:
        return safe_str(exc)


def storable(text: str) -> str:
    """``text`` as a Postgres text column takes it: a NUL written ``\\x00``, a lone surrogate
    as its escape (``\\udc80``)."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def unstorable(text: str) -> str | None:
    """What in ``text`` Postgres cannot store as text (a NUL; a lone surrogate, not UTF-8), in
    words for an error message; None when it can. A name, key or id holding either is refused
    where it is given: sent, it failed in the middle of the engine's write."""
    if "\x00" in text:
        return "a NUL character (\\x00)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate ({text[exc.start]!r}), which is not valid Unicode"
    return None


def describe_exception(exc: BaseException, limit: int = 8000) -> str:
    """``Type: message`` then the traceback, cut to ``limit`` characters (the end is kept),
    storable (see ``storable``)."""
    try:
        text = "".join(traceback.format_exception(exc)).rstrip()
    except BaseException as failure:  # a hostile __notes__, __cause__...
        text = f"(no traceback: formatting it raised {type(failure).__name__})"
    if len(text) > limit:
        text = "...\n" + text[-limit:]
    return storable(f"{exception_head(exc)}\n\n{text}")
