"""The lifecycle is one table (kestrel_core.lifecycle, issue 45): each transition names the SQL
that performs it, and that SQL exists; the lists of statuses derive from the enum; the diagram in
docs/how-it-works.md is the one the table generates."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import kestrel_core
from kestrel_core import LIVE_STATUSES, STATUSES, TERMINAL_STATUSES, AttemptOutcome, ExecutionStatus
from kestrel_core.db.statements import render
from kestrel_core.lifecycle import TRANSITIONS, diagram, transition

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS = ROOT / "kestrel_core" / "db" / "schema" / "functions"
DOC = ROOT / "docs" / "how-it-works.md"


def _sql_of(reference: str) -> str:
    """The SQL text a ``performed_by`` reference names (AssertionError when it names nothing)."""
    if reference.endswith(".sql"):
        path = FUNCTIONS / reference
        assert path.is_file(), f"{reference}: no such function file"
        return path.read_text()
    module, _, name = reference.partition(":")  # a constant, or ``SQL.name``: a block of its file
    text: object = importlib.import_module(module)
    for part in name.split("."):
        text = getattr(text, part, None)
    assert isinstance(text, str), f"{reference}: no such statement"
    # as it runs: the shared fragments a statement pastes ({abandon_and_wake}, ...) filled in
    return render(text, "kestrel").as_string(None)


def test_every_transition_names_sql_that_exists() -> None:
    assert len({t.name for t in TRANSITIONS}) == len(TRANSITIONS)
    for t in TRANSITIONS:
        assert t.performed_by, t.name
        for reference in t.performed_by:
            _sql_of(reference)
        assert set(t.only_if) <= set(t.from_states), t.name
        assert t.new_execution or t.from_states, t.name


def test_a_transition_that_closes_attempts_does_so_in_its_sql() -> None:
    for t in TRANSITIONS:
        if t.closes_attempts is None:
            continue
        closing = re.compile(rf"step_attempts\b[^;]*?SET outcome = '{t.closes_attempts}'", re.S)
        assert any(closing.search(_sql_of(r)) for r in t.performed_by), t.name


def test_the_lists_derive_from_the_enum() -> None:
    assert (
        STATUSES
        == tuple(ExecutionStatus)
        == ("enqueued", "running", "waiting", "paused", "success", "error", "cancelled")
    )
    assert LIVE_STATUSES == transition("cancel").from_states
    assert TERMINAL_STATUSES == frozenset(STATUSES) - frozenset(LIVE_STATUSES)
    assert all(type(s) is str for s in (*STATUSES, *LIVE_STATUSES, *TERMINAL_STATUSES))
    assert {"ExecutionStatus", "AttemptOutcome", "WaitKind", "WaitState"} <= set(kestrel_core.__all__)
    assert AttemptOutcome.ABANDONED == "abandoned" and f"{ExecutionStatus.PAUSED}" == "paused"
    # Every status is reached by some transition, and every live one can be left.
    assert {s for t in TRANSITIONS for s in t.to} == set(ExecutionStatus)
    assert {s for t in TRANSITIONS for s in t.from_states} >= set(LIVE_STATUSES)


def test_the_documented_diagram_is_the_generated_one() -> None:
    blocks = re.findall(r"```mermaid\n(.*?)```", DOC.read_text(), re.S)
    assert diagram() in blocks, (
        "docs/how-it-works.md's lifecycle diagram differs from kestrel_core.lifecycle.diagram(): paste its output"
    )
