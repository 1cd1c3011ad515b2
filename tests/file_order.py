"""The order xdist hands test files to its workers: longest first.

With ``--dist loadfile`` each worker runs whole files, taken from one queue in collection order
(with ``--no-loadscope-reorder``: xdist's default order, most tests first, started the one-test
chaos file, over a minute long, among the last while the other workers ran out of files).
Longest first, the last files to start are short ones and the workers finish together.

The seconds are what each file took (setup + call + teardown of its tests, summed) on 2 cores
with PgBouncer, files of 7 s or more; refresh them from ``pytest --durations=0`` when files grow
or the fixtures change (refreshed 2026-12-05, after the faster reset: test_partitions.py, over a
minute, was not listed and went out among the short files). A file not listed counts ``SECONDS_PER_TEST`` per test:
the order among the short ones hardly matters.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

SECONDS_PER_TEST = 0.1
FILE_SECONDS: dict[str, float] = {
    "tests/chaos/test_chaos.py": 85,
    "tests/core/test_partitions.py": 76,
    "tests/bench/test_smoke.py": 53,
    "tests/core/test_crash.py": 42,
    "tests/core/test_pgbouncer.py": 42,
    "tests/bench/test_mvcc_smoke.py": 40,
    "tests/core/test_frozen_worker.py": 33,
    "tests/cli/test_worker_processes.py": 32,
    "tests/core/test_async_fanout.py": 30,
    "tests/core/test_schedule_workers.py": 23,
    "tests/cli/test_demo_fresh.py": 23,
    "tests/console/tui/test_filter_text.py": 23,
    "tests/cli/test_demo.py": 23,
    "tests/console/tui/test_bound_to_ids.py": 22,
    "tests/console/tui/test_navigation.py": 21,
    "tests/core/test_queues.py": 20,
    "tests/console/tui/test_help_fits.py": 20,
    "tests/bench/test_migration_smoke.py": 20,
    "tests/core/test_counts_fold.py": 19,
    "tests/console/tui/test_help_and_palette.py": 19,
    "tests/core/test_children.py": 18,
    "tests/core/test_steps.py": 18,
    "tests/core/test_waits.py": 18,
    "tests/core/test_deadlines.py": 17,
    "tests/console/tui/test_approvals_filter.py": 15,
    "tests/console/adhoc/test_adhoc.py": 14,
    "tests/console/tui/test_executions.py": 14,
    "tests/cli/test_dsn_secrets.py": 13,
    "tests/cli/test_schedule_readme.py": 13,
    "tests/console/tui/test_dsn_secrets.py": 13,
    "tests/cli/test_sql_privileged.py": 13,
    "tests/console/tui/test_dashboard_counts_open.py": 12,
    "tests/console/tui/test_layout.py": 12,
    "tests/console/adhoc/test_adhoc_layers.py": 11,
    "tests/console/tui/test_sql_privileged.py": 11,
    "tests/console/tui/test_freshness.py": 11,
    "tests/console/tui/test_sql_editor.py": 11,
    "tests/core/test_prune.py": 10,
    "tests/console/read/test_reader.py": 10,
    "tests/core/test_schedules.py": 10,
    "tests/core/test_enqueue_batch.py": 10,
    "tests/console/tui/test_sort.py": 10,
    "tests/console/tui/test_outage.py": 9,
    "tests/cli/test_demo_attach.py": 9,
    "tests/console/tui/test_narrow_hints.py": 9,
    "tests/console/tui/test_result_drilldown.py": 9,
    "tests/cli/test_engine_commands.py": 9,
    "tests/console/tui/test_approvals.py": 9,
    "tests/core/test_migrate.py": 9,
    "tests/console/tui/test_schedules.py": 9,
    "tests/core/test_children_crash.py": 8,
    "tests/core/test_group_commit.py": 8,
    "tests/console/embedded_pg/test_embedded_pg.py": 8,
    "tests/console/tui/test_literal_text.py": 8,
    "tests/console/tui/test_queues.py": 8,
    "tests/cli/test_read_commands.py": 8,
    "tests/console/tui/test_scale.py": 8,
    "tests/console/tui/test_terminal_escapes.py": 8,
    "tests/core/test_events.py": 8,
    "tests/core/test_roles.py": 8,
    "tests/console/tui/test_sql.py": 8,
    "tests/test_architecture.py": 7,
    "tests/console/tui/test_dashboard_actions.py": 7,
    "tests/console/tui/test_counts_and_widths.py": 7,
}


def longest_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: files by their seconds, longest first; tests within a file
    (and files of equal weight) keep their collected order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered: Sequence[tuple[str, list[pytest.Item]]] = sorted(
        files.items(), key=lambda entry: -FILE_SECONDS.get(entry[0], SECONDS_PER_TEST * len(entry[1]))
    )
    items[:] = [item for _, in_file in ordered for item in in_file]
