"""safe_text.visible: every control character becomes its escape (issue 9)."""

from __future__ import annotations

import json

from kestrel_console.safe_text import json_safe, visible


def test_visible_escapes_c0_c1_del_and_bidi() -> None:
    assert (
        visible("a\x1b[31mb\x07c\rd\x00e\x7ff\x9bg\u202eh\u2066i")
        == "a\\x1b[31mb\\x07c\\rd\\x00e\\x7ff\\x9bg\\u202eh\\u2066i"
    )
    assert visible("one\ntwo\tthree") == "one\\ntwo\\tthree"
    assert visible("one\r\ntwo\tthree\x1b", newlines=True) == "one\ntwo\tthree\\x1b"
    assert visible("plain é ✓ 中") == "plain é ✓ 中"


def test_json_safe_keeps_the_value() -> None:
    value = {"k\x1b": "\x9b\u202e\x7f\x1b"}
    text = json_safe(json.dumps(value, ensure_ascii=False))
    assert not any(ch in text for ch in "\x1b\x9b\u202e\x7f")
    assert json.loads(text) == value
