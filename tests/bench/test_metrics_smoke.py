"""``python -m bench metrics`` at --quick sizes: it seeds, scrapes and reports what it read
(never how fast: that is the benchmark's job)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import suite
from tests.conftest import ADMIN_DSN


def test_metrics_times_a_scrape(tmp_path: Path) -> None:
    printed: list[str] = []
    opts = suite.Options.quick(admin=ADMIN_DSN, results=tmp_path, echo=printed.append)
    data = suite.metrics(opts)
    assert data["finished"] == opts.finished and data["live"] == opts.live
    assert data["snapshot"]["n"] == data["scrape"]["n"] == opts.dashboard_samples
    # The seed's finishes are spread over a week: a 15-second window holds a few of them.
    assert data["finishes_per_window"] >= 0 and data["step_attempts_seeded"] > 0
    assert data["exposition_bytes"] > 1000
    assert any("Metrics scrape at" in text for text in printed)
    assert json.loads((tmp_path / "metrics.json").read_text())["scrape"]["n"] == opts.dashboard_samples
