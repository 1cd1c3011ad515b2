"""Text from the database made harmless for a terminal.

Workflow names, inputs, outputs, errors, step ids, comments and SQL results are written by
whoever can enqueue or run a workflow. Printed raw, an ESC sequence in one of them can recolour
or clear the screen, move the cursor, set the window title or hide text; CR and bidi overrides
can make a line read as something it is not. Every place where such text meets a terminal
(the CLI's tables, the TUI's widgets) passes it through ``visible``: each control character is
shown as its escape (``\\x1b``, ``\\r``, ``\\u202e``), so it is seen, not obeyed.
"""

from __future__ import annotations

import re

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
