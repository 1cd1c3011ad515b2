"""The order xdist hands test files to its workers: longest first, those that mostly wait taking
turns with those that keep a core busy.

With ``--dist loadfile`` each worker runs whole files, taken from one queue in collection order
(with ``--no-loadscope-reorder``: xdist's default order, most tests first, started the one-test
chaos file, over a minute long, among the last while the other workers ran out of files).
Longest first, the last files to start are short ones and the workers finish together.

The seconds (``file_seconds.json``) are what each file took in a full run on 2 cores with
PgBouncer (setup + call + teardown of its tests, summed), every file of a second or more: a
long file left out counted as short, started among the last, and kept one worker busy ~10 s
after the others had finished. Refresh the table when files grow or the fixtures change::

    .venv/bin/python -m pytest --junitxml=times.xml
    .venv/bin/python -m tests.file_order times.xml

A file not in it counts ``SECONDS_PER_TEST`` per test: the order among the short ones hardly
matters.

Most of the longest files wait (for leases to lapse, workers to restart, a private server): five
of them started together left the 2 cores 13-39 % idle for the run's first 45 s. ``WAITING``
lists the files of 12 s or more that kept a core busy less than a third of their time when run
alone (CPU of the test process and of the server, 2026-12-05); they alternate with the others.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

SECONDS_PER_TEST = 0.3  # a file not in the table: new, or under a second when it was refreshed
TABLE = Path(__file__).with_name("file_seconds.json")
FILE_SECONDS: dict[str, float] = json.loads(TABLE.read_text())
WAITING = {
    "tests/chaos/test_chaos.py",
    "tests/chaos/test_failover_auto.py",
    "tests/core/test_crash.py",
    "tests/core/test_pgbouncer.py",
    "tests/core/test_frozen_worker.py",
    "tests/core/test_lifecycle_model.py",
    "tests/core/test_schedule_workers.py",
    "tests/cli/test_demo_fresh.py",
    "tests/cli/test_demo.py",
    "tests/core/test_steps.py",
    "tests/core/test_waits.py",
    "tests/core/test_children.py",
    "tests/console/tui/test_filter_text.py",
    "tests/core/test_deadlines.py",
    "tests/console/tui/test_approvals_filter.py",
    "tests/cli/test_schedule_readme.py",
}


def longest_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: files by their seconds, longest first, a file of ``WAITING``
    and one of the others in turn while both last; tests within a file (and files of equal
    weight) keep their collected order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered: Sequence[tuple[str, list[pytest.Item]]] = sorted(
        files.items(), key=lambda entry: -FILE_SECONDS.get(entry[0], SECONDS_PER_TEST * len(entry[1]))
    )
    waiting = [entry for entry in ordered if entry[0] in WAITING]
    busy = [entry for entry in ordered if entry[0] not in WAITING]
    turns = [entry for pair in zip(waiting, busy) for entry in pair]
    rest = waiting[len(busy) :] + busy[len(waiting) :]
    items[:] = [item for _, in_file in turns + rest for item in in_file]


def refresh(junit_xml: Path, table: Path = TABLE) -> dict[str, float]:
    """Write ``table`` from a run's JUnit report (its ``time`` per test is setup + call +
    teardown): every file of a second or more, longest first; return it."""
    root = TABLE.parent.parent
    seconds: dict[str, float] = {}
    for case in ET.parse(junit_xml).iter("testcase"):
        parts = case.get("classname", "").split(".")  # the module's dotted path, then any class
        while parts and not (root / Path(*parts).with_suffix(".py")).is_file():
            parts.pop()
        if not parts:  # not a file of this checkout (a report of another tree)
            continue
        path = "/".join(parts) + ".py"
        seconds[path] = seconds.get(path, 0.0) + float(case.get("time", 0.0))
    longest = {path: round(s) for path, s in sorted(seconds.items(), key=lambda entry: -entry[1]) if s >= 1.0}
    table.write_text(json.dumps(longest, indent=0) + "\n")
    return longest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.file_order JUNIT_XML  (from pytest --junitxml=JUNIT_XML)")
    print(f"{len(refresh(Path(sys.argv[1])))} files written to {TABLE.name}")
