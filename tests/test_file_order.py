"""The table of seconds per test file that orders the run is rebuilt from a JUnit report."""

from __future__ import annotations

import json
from pathlib import Path

from tests.file_order import FILE_SECONDS, refresh

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_file_order" name="test_a" time="0.7" />
<testcase classname="tests.test_file_order" name="test_b[x]" time="0.6" />
<testcase classname="tests.core.test_enqueue.TestGroup" name="test_c" time="2.4" />
<testcase classname="tests.test_statuses" name="test_d" time="0.2" />
<testcase classname="elsewhere.test_gone" name="test_e" time="9.0" />
</testsuite></testsuites>
"""


def test_seconds_are_summed_per_file_longest_first_short_and_unknown_files_left_out(tmp_path):
    report = tmp_path / "times.xml"
    report.write_text(REPORT)
    table = tmp_path / "file_seconds.json"

    written = refresh(report, table)

    assert written == {"tests/core/test_enqueue.py": 2, "tests/test_file_order.py": 1}
    assert list(json.loads(table.read_text()).items()) == list(written.items())


def test_the_committed_table_names_files_that_exist():
    assert FILE_SECONDS, "tests/file_seconds.json is empty"
    root = Path(__file__).parent.parent
    missing = [path for path in FILE_SECONDS if not (root / path).is_file()]
    assert not missing, f"refresh tests/file_seconds.json (python -m tests.file_order): {missing}"
