"""Smoke runs of ``mvcc`` (a held snapshot) and ``soak`` (retention on) at tiny durations.

They check the shape of what is printed and written (phases in order, one row per interval,
the verdict line), never a speed: at a few seconds the rates are noise.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import suite
from bench.__main__ import main
from bench.mvcc_designs import DESIGNS, Run, run_design
from tests.conftest import ADMIN_DSN, require_extension

INTERVAL_KEYS = {
    "t_s",
    "phase",
    "finished",
    "workflows_per_s",
    "hot_table_mib",
    "hot_table_indexes_mib",
    "schema_mib",
    "database_mib",
    "dead_tuples",
    "hot_pct",
    "index_entries_per_workflow",
    "commits_per_workflow",
    "indexes_mib",
    "dt_s",
    "deleted",
    "partitions",
    "partitions_dropped",
}


def test_mvcc_holds_a_snapshot_between_a_baseline_and_a_release(tmp_path: Path) -> None:
    require_extension("pageinspect")
    printed: list[str] = []
    opts = suite.Options.quick(admin=ADMIN_DSN, results=tmp_path, echo=printed.append)
    data = suite.mvcc(opts)
    phases = [r["phase"] for r in data["intervals"]]
    assert phases == sorted(phases, key=["warmup", "baseline", "hold", "after"].index)
    assert {"baseline", "hold", "after"} <= set(phases)
    assert data["held_to_the_end"] is True  # the session kept its xmin through the hold
    for row in data["intervals"]:
        assert INTERVAL_KEYS <= set(row) and row["finished"] >= 0
        # the table's primary key, or its partitions' (their names start with the table's)
        assert any(k.startswith("workflow_executions") and k.endswith("pkey") for k in row["indexes_mib"])
        assert row["partitions"] >= 1
    assert sum(r["finished"] for r in data["intervals"]) > 0
    exact = data["index_entries_in_hold"]  # pageinspect: the test server's superuser may create it
    assert exact is not None and set(exact) == {"workflows", "per_workflow", "by_index"}
    assert data["ratio"] == pytest.approx(data["hold_last_minute_wf_per_s"] / data["baseline_wf_per_s"], abs=0.01)
    text = "\n".join(printed)
    assert "Index sizes, MiB" in text and "HOT %" in text and "index entries/wf" in text
    assert re.search(r"of the hold / baseline: [\d,.]+ / [\d,.]+ wf/s = [\d.]+x \(target >= 0\.8x\)", printed[-2])
    assert json.loads((tmp_path / "mvcc.json").read_text())["hold_s"] == opts.phases.hold


def test_soak_runs_from_the_command_line_with_retention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "--quick",
                "--admin-dsn",
                ADMIN_DSN,
                "--results",
                str(tmp_path),
                "--minutes",
                "0.05",
                "--hold",
                "3",
                "soak",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "On-disk size per interval" in out and "database MiB" in out
    assert re.search(r"last [\d.]+ s / first [\d.]+ s: [\d,.]+ / [\d,.]+ wf/s = [\d.]+x \(target >= 0\.9x\)", out)
    data = json.loads((tmp_path / "soak.json").read_text())
    assert data["retention_s"] == suite.Options.quick().soak.retention and len(data["intervals"]) >= 2
    assert all(INTERVAL_KEYS <= set(r) and r["phase"] == "soak" for r in data["intervals"])
    assert isinstance(data["plateau"], bool) and "last_window_growth_mib" in data
    assert data["plateau"] == (data["peak_growth_mib"] < 0.05 * data["peak_last_third_mib"])
    assert isinstance(data["autovacuum"], bool) and ("autovacuum is off" in out) == (not data["autovacuum"])
    assert re.search(
        r"database size, peak of the last third .*: [\d,.]+ / [\d,.]+ MiB, [+-][\d,.]+ MiB \((a plateau|still growing)",
        out,
    )


def test_long_runs_only_when_named() -> None:
    from bench.suite import DEFAULT

    assert "mvcc" not in DEFAULT and "soak" not in DEFAULT and "throughput" in DEFAULT


@pytest.mark.parametrize("key", list(DESIGNS))
def test_each_claim_design_runs_a_baseline_and_a_hold(key: str) -> None:
    require_extension("pageinspect")
    printed: list[str] = []
    # One client and short phases: a design runs flat out, so its CPU grows with both (two clients
    # and 1.4 s: 14 s of CPU for the six designs; one and 1.0 s: 7 s; one and 0.5 s: 5 s).
    run = Run(clients=1, batch=4, backlog=200, warmup=0.05, baseline=0.25, hold=0.2)
    r = run_design(ADMIN_DSN, key, run, echo=printed.append)
    assert r["design"] == key and [line.split()[1] for line in printed] == ["warmup", "baseline", "hold"]
    for phase in (r["baseline"], r["hold"]):
        assert {"wf_per_s", "last_third_wf_per_s", "claim_ms", "hot_pct", "index_entries_per_workflow", "mib"} <= set(
            phase
        )
    assert r["baseline"]["wf_per_s"] > 0  # claims and completions went through
    assert r["index_entries_per_workflow"] is None or r["index_entries_per_workflow"] >= 0
