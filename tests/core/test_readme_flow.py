"""The README's examples for child workflows, events and deadlines, run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.waiting import wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def example(name: str) -> str:
    """The ```python block right after ``<!-- example: NAME -->`` in the README."""
    match = re.search(rf"<!-- example: {re.escape(name)} -->\n```python\n(.*?)```", README.read_text(), re.S)
    assert match, f"README example {name!r} not found"
    return match.group(1)


def test_readme_examples_run_as_written(dsn: str, start_worker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KESTREL_DSN", dsn)
    ns: dict = {}
    for name in ("children", "events", "deadlines"):
        exec(compile(example(name), f"README:{name}", "exec"), ns)
    app = ns["app"]
    try:
        start_worker(app)
        album = app.enqueue("album", ["a.png", "b.png"])
        checkout = app.enqueue("checkout", "A-17")
        report = app.enqueue("nightly-report", "2026-12-02")
        wait_for(lambda: app.get(checkout).status == "waiting", what="checkout to wait for its payment")
        exec(compile(example("events-send"), "README:events-send", "exec"), ns)
        for eid in (album, checkout, report):
            wait_for(lambda: app.get(eid).done, timeout=30, what=f"execution {eid}")
        assert app.get(album).output == {"thumbs": ["a.png@256px", "b.png@256px"], "cover": "cover.png@256px"}
        assert app.get(checkout).output == "paid 30"
        assert app.get(report).output == {"day": "2026-12-02", "rows": 42}
    finally:
        app.close()
