"""Global options shared by every command (``--dsn``, ``--schema``, ``--operator``, ...)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import typer

from kestrel_core import Kestrel
from kestrel_core.app import default_operator
from kestrel_core.connection import resolve_dsn


@dataclass
class Settings:
    dsn: str = ""
    schema: str = "kestrel"
    operator: str = field(default_factory=default_operator)
    queries: list[Path] = field(default_factory=list)
    dsn_given: bool = False  # --dsn or $KESTREL_DSN was set (the demo starts its own server if not)

    def kestrel(self) -> Kestrel:
        """A Kestrel app for this DSN and schema (the caller closes it)."""
        return Kestrel(self.dsn, schema=self.schema, application_name="kestrel-console")


def build_settings(dsn: str | None, schema: str, operator: str | None, queries: list[Path] | None) -> Settings:
    dirs = list(queries or [])
    env_dirs = os.environ.get("KESTREL_QUERIES")
    if env_dirs:
        dirs.extend(Path(p) for p in env_dirs.split(os.pathsep) if p)
    return Settings(
        dsn=resolve_dsn(dsn),
        schema=schema,
        operator=operator or default_operator(),
        queries=dirs,
        dsn_given=dsn is not None or "KESTREL_DSN" in os.environ,
    )


def settings(ctx: typer.Context) -> Settings:
    """The Settings the root callback stored on the context."""
    root = ctx.find_root()
    obj = root.obj
    if not isinstance(obj, Settings):  # invoked without the callback (tests calling directly)
        obj = build_settings(None, "kestrel", None, None)
        root.obj = obj
    return obj
