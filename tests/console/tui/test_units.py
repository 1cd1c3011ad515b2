"""The console's pure parts: the filter line, refresh presets and timeouts, confirmations."""

from __future__ import annotations

import pytest

from kestrel_console.tui.config import REFRESH_PRESETS, statement_timeout_ms, step_preset
from kestrel_console.tui.filters import ExecutionFilter, parse_filter
from kestrel_console.tui.operator import Target, confirmation


def test_parse_filter():
    assert parse_filter("status:error workflow:remediate pod api") == ExecutionFilter("error", "remediate", "pod api")
    assert parse_filter("s:RUNNING wf:'billing sync'") == ExecutionFilter("running", "billing sync", None)
    assert parse_filter("upstream 502") == ExecutionFilter(None, None, "upstream 502")
    assert parse_filter("") == ExecutionFilter()
    assert parse_filter("http://x") == ExecutionFilter(None, None, "http://x")  # unknown key: free text
    with pytest.raises(ValueError, match="unknown status 'done'.*enqueued, running"):
        parse_filter("status:done")
    assert str(parse_filter("status:error workflow:remediate x")) == "status:error workflow:remediate x"
    # workflow:=name is the whole name (a dashboard count opens it), and reads back as typed
    exact = parse_filter("workflow:=remediate")
    assert exact == ExecutionFilter(None, "remediate", None, exact=True) and str(exact) == "workflow:=remediate"
    assert parse_filter("workflow:=") == ExecutionFilter()


def test_refresh_presets_and_statement_timeout():
    assert step_preset(2.0, -1) == 1.0 and step_preset(2.0, 1) == 5.0
    assert step_preset(REFRESH_PRESETS[0], -1) == REFRESH_PRESETS[0]
    assert step_preset(REFRESH_PRESETS[-1], 1) == REFRESH_PRESETS[-1]
    assert step_preset(3.0, 1) == 5.0 and step_preset(3.0, -1) == 2.0  # an interval set by hand
    for interval in REFRESH_PRESETS:  # a refresh query is cancelled before the next is due
        assert statement_timeout_ms(interval) < interval * 1000


def test_confirmation_names_what_changes():
    one = confirmation("cancel", [Target(7, "billing-sync", "running")], "alice")
    assert one.startswith("Cancel execution 7 (billing-sync), now running?")
    assert "Recorded as 'alice'" in one
    many = confirmation(
        "approve", [Target(i, "remediate", "waiting", "approve-fix") for i in range(1, 11)], "bob", "lgtm"
    )
    assert many.startswith("Approve 10 approval gates?")
    assert "gate 'approve-fix' of execution 8 (remediate)" in many and "… and 2 more" in many
    assert "Comment: 'lgtm'" in many
