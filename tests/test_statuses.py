"""The statuses and the claim's predicates are defined once (kestrel_core/base/statuses.py,
kestrel_core/db/statements.py); SQL that Python does not compose spells them out, so every
list it spells is found here and checked against the definition: a status added, renamed or
dropped in one place and not the others fails (issue 19).

Searched: the schema's functions, the saved reports, what the migrations built (the schema
snapshot, checked against a live database by tests/core/test_schema_snapshot.py: partial
indexes, the CHECK, trigger conditions, function bodies) and every string of the engine's and
the console's Python (whose SQL should paste ``{live_statuses}`` and the like instead).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kestrel_core import LIVE_STATUSES, STATUSES, TERMINAL_STATUSES
from kestrel_core.db import statements
from kestrel_core.db.statements import render

ROOT = Path(__file__).resolve().parent.parent
# Two or more quoted words in a row, one of them a status: a spelled list (a single
# `status = 'x'` is not one). Every word counts: a status added in SQL alone shows as a word the
# definition lacks.
_ITEM = r"'[a-z_]+'(?:::text)?"
_LIST = re.compile(rf"{_ITEM}(?:\s*,\s*{_ITEM})+")
_WORD = re.compile(r"'([a-z_]+)'")
# The lists a definition names.
DEFINED = {
    frozenset(LIVE_STATUSES): "live",
    frozenset(TERMINAL_STATUSES): "terminal",
    frozenset(STATUSES): "every status",
}
# Lists that are deliberately neither (file, statuses): why.
OTHER_LISTS = {
    ("requeue_execution.sql", frozenset({"enqueued", "waiting", "success"})): "what a requeue refuses",
    ("schema_snapshot.txt", frozenset({"enqueued", "waiting", "success"})): "requeue_execution, as applied",
    ("decide_approval.sql", frozenset({"waiting", "paused"})): "a gate decided: its execution parked or paused",
    ("schema_snapshot.txt", frozenset({"waiting", "paused"})): "decide_approval, as applied",
    ("execution_finished.sql", frozenset({"waiting", "paused"})): "an execution that may hold open waits",
    # Migration 0030 kept these three-status partial indexes (no rebuild of the history's
    # indexes): the deadline sweep does not end a paused execution, and the fan-in check of
    # execution_finished counts a paused child as not live (its parent wakes early, parks again).
    ("execution_finished.sql", frozenset({"enqueued", "running", "waiting"})): "the fan-in's live children index",
    ("schema_snapshot.txt", frozenset({"enqueued", "running", "waiting"})): "the deadline and live children indexes",
    ("deadlines.sql", frozenset({"enqueued", "running"})): "a deadline not parked on a wait",
    ("fork_execution.sql", frozenset({"enqueued", "running"})): "what a fork refuses: not stopped yet",
    ("schema_snapshot.txt", frozenset({"enqueued", "running"})): "fork_execution, as applied",
    ("boundary.sql", frozenset({"running", "paused"})): "a claim's boundary write: running, or paused under it",
    ("lease.sql", frozenset({"running", "paused"})): "a claim's lease: running, or paused under it (a step in flight)",
    ("worker-activity.sql", frozenset({"success", "error"})): "runs a worker finished itself",
    ("schema_snapshot.txt", frozenset({"running", "success", "error", "cancelled", "abandoned"})): (
        "a step attempt's outcomes (AttemptOutcome), not statuses"
    ),
}
# The predicates of the claim, spelled only in statements.sql (pasted by name elsewhere).
PREDICATES = {
    "queue_is_limited": "q.per_worker IS NOT NULL",
    "version_matches": ".version IS NULL OR",
}


def _sql_texts() -> dict[str, str]:
    """Every text that may hold SQL, by path: .sql files, the snapshot, Python strings."""
    texts: dict[str, str] = {}
    sql_files = [
        *(ROOT / "kestrel_core" / "db" / "schema" / "functions").glob("*.sql"),
        *(ROOT / "queries").glob("*.sql"),
        ROOT / "tests" / "core" / "schema_snapshot.txt",
        # the statements beside the modules that run them
        *(
            p
            for package in ("kestrel_core", "kestrel_console")
            for p in (ROOT / package).rglob("*.sql")
            if p.with_suffix(".py").exists()
        ),
    ]
    for path in sql_files:
        texts[str(path.relative_to(ROOT))] = path.read_text()
    for package in ("kestrel_core", "kestrel_console"):
        for path in sorted((ROOT / package).rglob("*.py")):
            strings = [
                n.value
                for n in ast.walk(ast.parse(path.read_text(), str(path)))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            texts[str(path.relative_to(ROOT))] = "\n".join(strings)
    return texts


def spelled_lists(texts: dict[str, str]) -> list[tuple[str, frozenset[str]]]:
    """(path, statuses) of every list of quoted statuses in ``texts``."""
    found = [
        (path, frozenset(_WORD.findall(m.group(0))))
        for path, text in sorted(texts.items())
        for m in _LIST.finditer(text)
    ]
    return [(path, words) for path, words in found if words & set(STATUSES)]


def off_definition(found: list[tuple[str, frozenset[str]]]) -> list[str]:
    return [
        f"{path}: {sorted(statuses)}"
        for path, statuses in found
        if statuses not in DEFINED and (Path(path).name, statuses) not in OTHER_LISTS
    ]


def test_every_spelled_list_of_statuses_is_a_defined_one() -> None:
    found = spelled_lists(_sql_texts())
    assert off_definition(found) == []
    # The search sees the places that must spell them (so an empty result is no pass).
    where = {(Path(p).name, DEFINED.get(s, "other")) for p, s in found}
    assert {
        ("lock_live_execution.sql", "live"),
        ("prune_finished.sql", "terminal"),
        ("execution_finished.sql", "live"),
        ("schema_snapshot.txt", "every status"),  # the CHECK on workflow_executions.status
        ("schema_snapshot.txt", "live"),
        ("schema_snapshot.txt", "terminal"),
    } <= where
    # Each deliberate other list is still there (a stale entry is removed).
    assert {(Path(p).name, s) for p, s in found} >= set(OTHER_LISTS)


def test_the_check_sees_a_list_that_drifted() -> None:
    texts = {"cancel_execution.sql": "IF e.status NOT IN ('enqueued', 'running', 'waiting') THEN"}
    assert off_definition(spelled_lists(texts)) == ["cancel_execution.sql: ['enqueued', 'running', 'waiting']"]
    # A status the database gained and the definition did not.
    texts = {"x.sql": "CHECK (status = ANY (ARRAY['enqueued'::text, 'running'::text, 'held'::text, 'waiting'::text]))"}
    assert off_definition(spelled_lists(texts)) == ["x.sql: ['enqueued', 'held', 'running', 'waiting']"]
    assert spelled_lists({"y.sql": "TG_OP IN ('UPDATE', 'DELETE'), kind IN ('sleep', 'approval')"}) == []


def test_python_composed_sql_pastes_the_definitions() -> None:
    rendered = render("status IN {live_statuses} OR status IN {terminal_statuses} {status_order}", "s").as_string(None)
    assert rendered == (
        "status IN ('enqueued', 'running', 'waiting', 'paused') OR status IN ('success', 'error', 'cancelled') "
        "ARRAY['enqueued', 'running', 'waiting', 'paused', 'success', 'error', 'cancelled']"
    )
    assert set(STATUSES) == set(LIVE_STATUSES) | TERMINAL_STATUSES and not set(LIVE_STATUSES) & TERMINAL_STATUSES


def test_the_claim_predicates_are_spelled_once() -> None:
    assert PREDICATES["queue_is_limited"] in statements.SQL.queue_is_limited
    assert PREDICATES["version_matches"] in statements.SQL.version_matches
    spelled = {
        name: sorted(p for p, text in _sql_texts().items() if needle in text and not p.endswith("db/statements.sql"))
        for name, needle in PREDICATES.items()
    }
    assert spelled == {name: [] for name in PREDICATES}, "paste {queue_is_limited} / {version_matches} instead"
