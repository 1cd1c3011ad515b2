"""The examples of docs/flow-control.md for child workflows, events and deadlines, run as written."""

from __future__ import annotations

import re

import pytest

from tests.readme_blocks import ROOT
from tests.waiting import wait_for

DOC = "docs/flow-control.md"


def example(name: str) -> str:
    """The ```python block right after ``<!-- example: NAME -->`` in the flow-control page."""
    text = (ROOT / DOC).read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {re.escape(name)} -->\n```python\n(.*?)```", text, re.S)
    assert match, f"{DOC}: example {name!r} not found"
    return match.group(1)


def test_readme_examples_run_as_written(dsn: str, start_worker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KESTREL_DSN", dsn)
    ns: dict = {}
    for name in ("children", "events", "deadlines"):
        exec(compile(example(name), f"{DOC}:{name}", "exec"), ns)
    app = ns["app"]
    try:
        start_worker(app)
        album = app.enqueue("album", ["a.png", "b.png"])
        checkout = app.enqueue("checkout", "A-17")
        report = app.enqueue("nightly-report", "2026-12-02")
        wait_for(lambda: app.get(checkout).status == "waiting", what="checkout to wait for its payment")
        exec(compile(example("events-send"), f"{DOC}:events-send", "exec"), ns)
        for eid in (album, checkout, report):
            wait_for(lambda: app.get(eid).done, timeout=30, what=f"execution {eid}")
        assert app.get(album).output == {"thumbs": ["a.png@256px", "b.png@256px"], "cover": "cover.png@256px"}
        assert app.get(checkout).output == "paid 30"
        assert app.get(report).output == {"day": "2026-12-02", "rows": 42}
    finally:
        app.close()
