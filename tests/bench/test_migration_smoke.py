"""A smoke run of ``bench migration``: today's schema from git, seeded, migrated while a probe
writes, every row checked (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.migration import PARTITIONED_AT
from kestrel_core.db.migrate import LATEST
from tests.conftest import ADMIN_DSN


def test_a_seeded_database_migrates_under_writes_with_every_row_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--quick", "--admin-dsn", ADMIN_DSN, "--results", str(tmp_path), "--migrate-executions", "3000"]
    assert main([*argv, "migration"]) == 0
    out = capsys.readouterr().out
    assert "Migration of a populated database while it is written to" in out
    data = json.loads((tmp_path / "migration.json").read_text())
    # from the newest commit before the partitioned history: its version depends on the history
    assert data["from_version"] < PARTITIONED_AT <= data["to_version"] == LATEST
    assert data["workflow_executions_kind"] == ("p" if LATEST >= PARTITIONED_AT else "r")
    assert data["checks"]["executions"] == [3000 + 10_000, 3000 + 10_000]
    assert data["rows_unchanged"] is True and data["old_key_deduplicated"] is True
    assert data["probe_error_count"] == 0 and data["probe_ops_during"] >= 1
