"""One settings object for the CLI and the TUI: the TUI starts from what the CLI built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kestrel_console.settings import DEFAULT_REFRESH, Settings, build_settings, console_settings


def test_the_tui_gets_the_cli_settings_with_its_own_options(monkeypatch, tmp_path):
    monkeypatch.setenv("KESTREL_QUERIES", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    monkeypatch.setenv("KESTREL_OPERATOR", "oncall")
    cli = build_settings("postgresql://u@127.0.0.1/db", "ops", None, [tmp_path / "mine"])
    assert cli == Settings(
        dsn="postgresql://u@127.0.0.1/db",
        schema="ops",
        operator="oncall",
        queries=[tmp_path / "mine", tmp_path / "a", tmp_path / "b"],
        dsn_given=True,
        schema_given=True,  # --schema given: it wins over a worker app's own
    )

    tui = console_settings(cli, read_only=True, refresh=5)
    assert isinstance(tui, Settings) and tui is not cli
    assert (tui.dsn, tui.schema, tui.operator, tui.queries) == (cli.dsn, "ops", "oncall", cli.queries)
    assert (tui.read_only, tui.refresh) == (True, 5.0)
    assert (cli.read_only, cli.refresh) == (False, DEFAULT_REFRESH)  # the CLI's object is left alone


def test_keywords_win_and_a_dsn_string_is_enough(monkeypatch):
    monkeypatch.delenv("KESTREL_DSN", raising=False)
    cli = build_settings("postgresql://u@127.0.0.1/db", "kestrel", "alice", None)
    tui = console_settings(cli, operator="bob", schema="other", queries=[Path("q")])
    assert (tui.operator, tui.schema, tui.queries) == ("bob", "other", [Path("q")])

    plain = console_settings("postgresql://v@127.0.0.1/x")
    assert (plain.dsn, plain.schema, plain.read_only) == ("postgresql://v@127.0.0.1/x", "kestrel", False)
    with pytest.raises(ValueError):
        console_settings(cli, schema="bad name; drop")
