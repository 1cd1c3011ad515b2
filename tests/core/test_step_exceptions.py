"""Issue 43 (2, 3): whatever a step or a workflow body raises ends in the documented outcome.

Every exception class, BaseException included (SystemExit, KeyboardInterrupt, GeneratorExit,
asyncio.CancelledError, an application's own BaseException subclass, and a plain Exception to
compare), raised by every kind of step (plain function or coroutine, with or without a
timeout, in a sync or an async workflow) at step position 1 and 2, and by sync and async
workflow bodies: the whole product, in one real worker process with fewer runner threads than
executions. A raising step is a failed attempt: retried (``retries=1``: two attempts, both in
the ledger and the timeline), then StepFailed, which ends the workflow as error; a body that
raises ends it as error naming the class. No execution is left running, and the same worker
then still runs sync and async workflows on all its threads (before the fix a SystemExit
killed a runner thread the worker went on claiming for, a coroutine step's CancelledError
stranded its execution until every lease, and a SystemExit out of an async workflow ended the
worker's event loop).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import psycopg

from kestrel_core import Kestrel
from tests.core.exceptions_app import ASYNC_KINDS, RAISED, SYNC_KINDS
from tests.waiting import wait_all_ended, wait_for
from tests.worker_processes import start_worker_process, stop_worker_processes

CONCURRENCY = 4


def test_every_exception_class_a_step_or_workflow_raises_ends_in_its_outcome(
    app: Kestrel, dsn: str, ledger: psycopg.Connection, tmp_path: Path
) -> None:
    cases: dict[int, tuple[str, dict]] = {}
    for name, at in itertools.product(RAISED, (1, 2)):
        for workflow, kinds in (("step-sync", SYNC_KINDS), ("step-async", ASYNC_KINDS)):
            for kind in kinds:
                case = {"name": name, "at": at, "kind": kind}
                cases[app.enqueue(workflow, case)] = (workflow, case)
        for workflow in ("body-sync", "body-async"):
            case = {"name": name, "at": at}
            cases[app.enqueue(workflow, case)] = (workflow, case)
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = start_worker_process(
            dsn,
            "tests.core.exceptions_app:app",
            "--processes",
            "1",
            "--concurrency",
            str(CONCURRENCY),
            "--lease",
            "30",  # a stranded execution would wait out this lease: none may
            out=out,
        )
    try:
        ids = list(cases)
        wait_all_ended(ledger, ids, what=f"all {len(ids)} executions to end", timeout=120, interval=0.2)
        wrong = []
        for eid, (workflow, case) in cases.items():
            got = app.get(eid)
            first = (got.error or "").split("\n", 1)[0]
            name = case["name"]
            if workflow.startswith("step"):
                attempts = ledger.execute(
                    "SELECT count(*) FROM public.ledger WHERE execution_id = %s AND step_id = 'boom'", (eid,)
                ).fetchone()[0]
                timeline = ledger.execute(
                    "SELECT count(*) FROM kestrel.step_attempts WHERE execution_id = %s AND step_id = 'boom'"
                    " AND outcome = 'error' AND error LIKE %s",
                    (eid, f"{name}%"),
                ).fetchone()[0]
                expected = ("error", f"StepFailed: step 'boom' failed 2 times: {name}", 2, 2)
                if (got.status, first[: len(expected[1])], attempts, timeline) != expected:
                    wrong.append((workflow, case, got.status, first, attempts, timeline))
            elif got.status != "error" or not first.startswith(name):
                wrong.append((workflow, case, got.status, first))
        assert wrong == [], f"{len(wrong)} of {len(cases)} not as documented: {wrong[:6]}"

        # The same worker still runs as many executions at once as it has threads, sync and async.
        more = [app.enqueue("ok", n) for n in range(3 * CONCURRENCY)]
        more += [app.enqueue("ok-async", n) for n in range(3 * CONCURRENCY)]
        wait_for(lambda: all(app.get(eid).done for eid in more), timeout=60, what="the later executions to finish")
        assert {app.get(eid).status for eid in more} == {"success"}
    except AssertionError as exc:
        live = ledger.execute(
            "SELECT id, status, input FROM kestrel.workflow_executions WHERE status NOT IN ('success', 'error')"
        ).fetchall()
        raise AssertionError(f"{exc}; not ended: {live[:10]}; worker log: {log.read_text()[-3000:]}") from None
    finally:
        stop_worker_processes([proc])
    text = log.read_text()
    assert "event=execution_crashed" not in text and "event=runner_died" not in text, text[-3000:]
    assert text.count("event=step_raised_base_exception") >= 2 * (len(RAISED) - 1) * 2 * (
        len(SYNC_KINDS) + len(ASYNC_KINDS)
    ), "every attempt that raised a BaseException is logged"
    assert "event=workflow_raised_base_exception" in text
