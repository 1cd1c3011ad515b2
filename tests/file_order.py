"""The order xdist hands test files to its workers: longest first, those that mostly wait taking
turns with those that keep a core busy.

With ``--dist loadfile`` each worker runs whole files, taken from one queue in collection order
(with ``--no-loadscope-reorder``: xdist's default order, most tests first, started the one-test
chaos file, over a minute long, among the last while the other workers ran out of files).
Longest first, the last files to start are short ones and the workers finish together.

The seconds are what each file took (setup + call + teardown of its tests, summed) on 2 cores
with PgBouncer, files of 7 s or more; refresh them from ``pytest --durations=0`` when files grow
or the fixtures change (refreshed 2026-12-05 afternoon, once the reset dropped the ranges a
test adds and the benchmarks' smoke runs were shortened). A file not listed counts ``SECONDS_PER_TEST`` per test:
the order among the short ones hardly matters.

Most of the longest files wait (for leases to lapse, workers to restart, a private server): five
of them started together left the 2 cores 13-39 % idle for the run's first 45 s. ``WAITING``
lists the files of 12 s or more that kept a core busy less than a third of their time when run
alone (CPU of the test process and of the server, 2026-12-05); they alternate with the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

SECONDS_PER_TEST = 0.1
FILE_SECONDS: dict[str, float] = {
    "tests/chaos/test_chaos.py": 91,
    "tests/bench/test_smoke.py": 57,
    "tests/core/test_crash.py": 49,
    "tests/core/test_pgbouncer.py": 41,
    "tests/core/test_frozen_worker.py": 34,
    "tests/cli/test_worker_processes.py": 33,
    "tests/core/test_async_fanout.py": 31,
    "tests/bench/test_mvcc_smoke.py": 29,
    "tests/console/tui/test_help_fits.py": 28,
    "tests/cli/test_demo_fresh.py": 26,
    "tests/core/test_schedule_workers.py": 23,
    "tests/cli/test_demo.py": 22,
    "tests/core/test_children.py": 21,
    "tests/core/test_steps.py": 20,
    "tests/core/test_queues.py": 20,
    "tests/core/test_waits.py": 19,
    "tests/core/test_partitions.py": 18,
    "tests/core/test_counts_fold.py": 18,
    "tests/cli/test_schedule_readme.py": 18,
    "tests/console/tui/test_help_and_palette.py": 17,
    "tests/core/test_deadlines.py": 17,
    "tests/console/tui/test_bound_to_ids.py": 17,
    "tests/console/tui/test_filter_text.py": 17,
    "tests/console/tui/test_executions.py": 15,
    "tests/console/tui/test_approvals_filter.py": 15,
    "tests/console/adhoc/test_adhoc.py": 14,
    "tests/console/tui/test_navigation.py": 13,
    "tests/console/tui/test_counts_and_widths.py": 12,
    "tests/console/tui/test_dsn_secrets.py": 12,
    "tests/console/tui/test_layout.py": 11,
    "tests/cli/test_dsn_secrets.py": 11,
    "tests/console/tui/test_freshness.py": 11,
    "tests/console/tui/test_sql_editor.py": 11,
    "tests/console/tui/test_detail.py": 10,
    "tests/cli/test_sql_privileged.py": 10,
    "tests/console/tui/test_sql_privileged.py": 10,
    "tests/console/tui/test_approvals.py": 9,
    "tests/core/test_children_crash.py": 9,
    "tests/core/test_prune.py": 9,
    "tests/cli/test_engine_commands.py": 9,
    "tests/console/tui/test_sql.py": 9,
    "tests/core/test_schedules.py": 8,
    "tests/console/tui/test_detail_children.py": 8,
    "tests/console/adhoc/test_adhoc_layers.py": 8,
    "tests/console/tui/test_literal_text.py": 8,
    "tests/console/tui/test_narrow_hints.py": 8,
    "tests/console/embedded_pg/test_embedded_pg.py": 7,
    "tests/cli/test_read_commands.py": 7,
    "tests/console/read/test_reader.py": 7,
    "tests/console/tui/test_result_drilldown.py": 7,
    "tests/console/tui/test_outage.py": 7,
}
WAITING = {
    "tests/chaos/test_chaos.py",
    "tests/core/test_crash.py",
    "tests/core/test_pgbouncer.py",
    "tests/core/test_frozen_worker.py",
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
