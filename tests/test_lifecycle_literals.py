"""The console spells no execution status, attempt outcome or wait state in its Python: every
one it compares with or lists comes from the engine's lifecycle (kestrel_core.lifecycle), so a
state or a transition is named once (issue 45, "one lifecycle").

Checked on the syntax tree, precisely: a comparison of a status-like value (an expression that
mentions ``status``, ``outcome`` or ``state``) with a literal state word, and a tuple, list or set
of two or more distinct state words that is compared against (``in``) or assigned to a name.
SQL text (constants, .sql files) keeps its literals; dictionary keys (the colours of style.py,
column names) and call arguments (CTE and column names that happen to read like a status) are
not state rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kestrel_core.lifecycle import AttemptOutcome, ExecutionStatus, WaitState, transition

ROOT = Path(__file__).resolve().parent.parent
WORDS = {str(s) for enum in (ExecutionStatus, AttemptOutcome, WaitState) for s in enum}
MENTIONS = ("status", "outcome", "state")


def _word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in WORDS


def _spelled_set(node: ast.AST) -> bool:
    return (
        isinstance(node, (ast.Tuple, ast.List, ast.Set))
        and len({e.value for e in node.elts if isinstance(e, ast.Constant)}) >= 2
        and all(_word(e) for e in node.elts)
    )


def literals(source: str, path: str = "<text>") -> list[str]:
    """Where ``source`` spells a state rule with literal words: ``path:line: code``."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            words = [s for s in sides if _word(s)]
            others = " ".join(ast.unparse(s) for s in sides if not _word(s))
            sets = [c for op, c in zip(node.ops, node.comparators) if isinstance(op, (ast.In, ast.NotIn))]
            if (words and any(m in others for m in MENTIONS)) or any(_spelled_set(c) for c in sets):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _spelled_set(node.value):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_console_spells_no_state_rule() -> None:
    found = []
    for path in sorted((ROOT / "kestrel_console").rglob("*.py")):
        found += literals(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


def test_the_check_sees_a_spelled_rule_and_lets_others_be() -> None:
    spelled = """
REQUEUEABLE = ("error", "cancelled")
if row.get("status") == "running": pass
if status in ("enqueued", "running"): pass
if lane.last.outcome != "abandoned": pass
"""
    assert [f.split(": ", 1)[1] for f in literals(spelled)] == [
        "REQUEUEABLE = ('error', 'cancelled')",
        "row.get('status') == 'running'",
        "status in ('enqueued', 'running')",
        "lane.last.outcome != 'abandoned'",
    ]
    others = """
COLOURS = {"running": "yellow", "error": "red"}
COLUMNS = [("waiting", "waiting"), ("error", "error")]
part = LivePart("activity", ("running", "waiting"))
if "error" in fields: pass
SQL = "SELECT 1 WHERE status IN ('enqueued', 'running')"
"""
    assert literals(others) == []


def test_the_console_offers_what_the_lifecycle_allows() -> None:
    from kestrel_console.tui.allowed import allows

    for action in ("cancel", "pause", "resume"):
        allowed = {s for s in ExecutionStatus if allows(action, {"status": str(s)})}
        assert allowed == set(transition(action).from_states), action
    requeue = transition("requeue")
    assert {s for s in ExecutionStatus if allows("requeue", {"status": str(s)})} == set(requeue.from_states) - set(
        requeue.only_if
    )
    assert allows("requeue", {"status": "running", "lease_expired": True})
    assert {s for s in ExecutionStatus if allows("fork", {"status": str(s)})} == set(transition("fork").from_states)
