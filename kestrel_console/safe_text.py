"""Text from the database made harmless for a terminal.

Workflow names, inputs, outputs, errors, step ids, comments and SQL results are written by
whoever can enqueue or run a workflow. Printed raw, an ESC sequence in one of them can recolour
or clear the screen, move the cursor, set the window title or hide text; CR and bidi overrides
can make a line read as something it is not. Every place where such text meets a terminal
(the CLI's tables, the TUI's widgets) passes it through ``visible``: each control character is
shown as its escape (``\\x1b``, ``\\r``, ``\\u202e``), so it is seen, not obeyed.

Markup is the other way text can be obeyed: Rich and Textual read a ``str`` handed to a table
cell, a column label, an option or a Static as markup and emoji codes, so a step id
``wait-all:child:resize+2`` would show a child emoji and a comment ``[bold]lgtm[/bold]`` bold
text. ``literal`` is the one way the TUI turns text into something to show: a ``rich.text.Text``
(never parsed) of the ``visible`` text, so the screen shows exactly what is stored.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich only where literal is called: the headless modules import this one too
    from rich.text import Text

# C0 controls except TAB and LF (handled by ``newlines``), DEL, C1 controls, the bidi
# embeddings/overrides/isolates and marks, and the Unicode line/paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# What json.dumps(ensure_ascii=False) leaves raw although a terminal may obey it (it escapes
# only U+0000-U+001F): DEL, C1, bidi controls, line separators.
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character spelled as an escape.

    ``newlines=True`` keeps LF and TAB (a multi-line field shown as such: an error with its
    traceback); otherwise they are escaped too and the result is one line.
    """
    pattern = _CONTROL if newlines else _CONTROL_OR_BREAK
    if newlines:
        text = text.replace("\r\n", "\n")
    return pattern.sub(_escape, text)


def has_control(text: str) -> bool:
    """Whether ``text`` holds anything ``visible`` would escape (LF and TAB aside)."""
    return _CONTROL.search(text) is not None


def json_safe(text: str) -> str:
    """JSON text (from json.dumps with ensure_ascii=False) with the characters it leaves raw
    that a terminal may obey written as ``\\uXXXX``; the JSON value is unchanged."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def literal(value: Any, *, style: str = "", newlines: bool = False) -> Text:
    """``value`` as Text to show: control characters as escapes (``visible``), never read as
    markup or emoji codes. Text is returned as it is when it needs no escaping (a cell the
    console built, with its own styles); anything else is its ``str``."""
    from rich.text import Text

    if isinstance(value, Text):
        plain = value.plain
        if not (has_control(plain) or (not newlines and ("\n" in plain or "\t" in plain))):
            return value
        return Text(visible(plain, newlines=newlines), style=value.style or style)
    return Text(visible("" if value is None else str(value), newlines=newlines), style=style)
