"""`kestrel-console worker --processes N`: N worker processes under a supervisor (real Postgres,
real processes). Each child has its own `workers` row and claims work; a dead one is replaced;
signals reach every child; children never outlive the supervisor; children that cannot start
end the supervisor with one error, not endless restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from kestrel_console.cli.supervision import default_processes
from kestrel_console.embedded_pg.process import process_alive
from kestrel_core import Kestrel
from tests.cli.script import console
from tests.waiting import wait_for

# Steps that say which process ran them. `meet` returns only once `n` processes are in it at
# the same time: with --concurrency 1, n executions of it can only finish if n processes each
# claimed one.
APP = textwrap.dedent("""
    import os, time
    from pathlib import Path
    from kestrel_core import Kestrel

    if Path("BROKEN").exists():
        raise RuntimeError("procs_app is broken on purpose")

    app = Kestrel()

    def meet(folder, n):
        Path(folder, f"pid-{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while len(list(Path(folder).glob("pid-*"))) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return os.getpid()

    @app.workflow("meet")
    def meet_workflow(ctx, spec):
        return ctx.step("meet", meet, spec["folder"], spec["n"])

    @app.workflow("hang")
    def hang(ctx, _):
        return ctx.step("hang", time.sleep, 600)
""")

LIVE = "SELECT worker_id, pid, concurrency FROM workers WHERE stopped_at IS NULL ORDER BY worker_id"


class Supervisor:
    """``kestrel-console --dsn DSN worker procs_app ARGS`` in ``folder``, its output in a file.
    The DSN is given on the command line (not in the environment): the children get it from
    the options passed on."""

    def __init__(self, folder: Path, dsn: str, *args: str) -> None:
        (folder / "procs_app.py").write_text(APP)
        self.log = folder / "worker.log"
        env = {k: v for k, v in os.environ.items() if k not in ("KESTREL_DSN", "PGDATABASE")}
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kestrel_console", "--dsn", dsn, "worker", "procs_app", *args],
                cwd=folder,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def supervisors():
    started: list[Supervisor] = []

    def start(folder: Path, dsn: str, *args: str) -> Supervisor:
        started.append(Supervisor(folder, dsn, *args))
        return started[-1]

    yield start
    for sup in started:
        sup.close()


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def live_workers(db: psycopg.Connection, sup: Supervisor, n: int, ids: list[str] | None = None) -> dict[str, int]:
    """Wait until ``n`` live `workers` rows (named ``ids``, when given) belong to running children
    of ``sup``; returns worker id -> pid."""

    def ready() -> dict[str, int] | None:
        assert sup.proc.poll() is None, sup.output
        rows = {wid: pid for wid, pid, _ in db.execute(LIVE) if process_alive(pid) and parent_of(pid) == sup.proc.pid}
        return rows if len(rows) == n and (ids is None or sorted(rows) == ids) else None

    return wait_for(ready, timeout=60, what=f"{n} worker processes to register")


def meet(app: Kestrel, db: psycopg.Connection, folder: Path, n: int) -> dict[int, str]:
    """Run ``n`` `meet` executions that need ``n`` processes at once; returns pid -> owner."""
    folder.mkdir()
    ids = [app.enqueue("meet", {"folder": str(folder), "n": n}) for _ in range(n)]
    done = "SELECT output, owner_id FROM workflow_executions WHERE id = ANY(%s) AND status = 'success'"
    wait_for(lambda: len(db.execute(done, (ids,)).fetchall()) == n, timeout=60, what=f"{n} processes to meet")
    return dict(db.execute(done, (ids,)).fetchall())


def two_workers(
    supervisors, db: psycopg.Connection, dsn: str, folder: Path, lease: str = "5"
) -> tuple[Supervisor, dict[str, int]]:
    """A supervisor of two processes wp-1 and wp-2 (one slot each), both registered and ready."""
    sup = supervisors(folder, dsn, "--processes", "2", "--worker-id", "wp", "--concurrency", "1", "--lease", lease)
    pids = live_workers(db, sup, 2, ["wp-1", "wp-2"])
    wait_for(lambda: sup.output.count("event=process_ready") == 2, what="both to report ready")
    return sup, pids


def stopped(sup: Supervisor) -> int:
    """SIGTERM the supervisor; its exit status."""
    sup.proc.send_signal(signal.SIGTERM)
    return sup.wait()


def test_two_processes_register_two_workers_that_both_claim_work(supervisors, app: Kestrel, db, tmp_path: Path) -> None:
    sup, pids = two_workers(supervisors, db, app.dsn, tmp_path)
    assert sup.proc.pid not in pids.values()
    # Every option given reached the children (the DSN too: it is not in their environment).
    assert [row[2] for row in db.execute(LIVE)] == [1, 1]

    ran = meet(app, db, tmp_path / "both", 2)
    assert ran == {pid: wid for wid, pid in pids.items()}
    assert stopped(sup) == 0, sup.output


def test_a_killed_process_is_replaced_and_the_replacement_claims_work(
    supervisors, app: Kestrel, db, tmp_path: Path
) -> None:
    sup, pids = two_workers(supervisors, db, app.dsn, tmp_path)
    os.kill(pids["wp-1"], signal.SIGKILL)

    def replacement() -> dict[str, int] | None:
        now = live_workers(db, sup, 2, ["wp-1", "wp-2"])
        return now if now["wp-1"] != pids["wp-1"] else None

    replaced = wait_for(replacement, timeout=60, what="a replacement for wp-1")
    assert replaced["wp-2"] == pids["wp-2"]
    assert f"event=process_exited process=1/2 pid={pids['wp-1']} signal=SIGKILL" in sup.output
    ran = meet(app, db, tmp_path / "after", 2)
    assert ran == {replaced["wp-1"]: "wp-1", pids["wp-2"]: "wp-2"}
    assert stopped(sup) == 0, sup.output


def test_sigterm_reaches_every_process_and_a_second_one_stops_their_wait(
    supervisors, app: Kestrel, db, tmp_path: Path
) -> None:
    sup, pids = two_workers(supervisors, db, app.dsn, tmp_path, lease="600")
    ids = [app.enqueue("hang", None) for _ in range(2)]
    running = "SELECT owner_id FROM workflow_executions WHERE status = 'running' ORDER BY owner_id"
    wait_for(lambda: [r[0] for r in db.execute(running)] == ["wp-1", "wp-2"], what="each process to run one")

    # Both stop claiming and wait for their steps (up to the lease: 600 s)...
    sup.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: sup.output.count("event=shutdown_requested") == 2, what="both processes to be told")
    assert sup.proc.poll() is None
    # ... until the second signal, passed on too: they stop waiting and hand the executions back.
    assert stopped(sup) == 0, sup.output

    assert not any(process_alive(pid) for pid in pids.values())
    assert db.execute("SELECT count(*) FROM workers WHERE stopped_at IS NULL").fetchone() == (0,)
    assert db.execute(
        "SELECT array_agg(DISTINCT status) FROM workflow_executions WHERE id = ANY(%s)", (ids,)
    ).fetchone() == (["enqueued"],)


def test_the_processes_die_with_a_killed_supervisor(supervisors, app: Kestrel, db, tmp_path: Path) -> None:
    sup = supervisors(tmp_path, app.dsn, "--processes", "2", "--lease", "5")
    pids = live_workers(db, sup, 2)
    sup.proc.kill()
    sup.proc.wait()
    wait_for(lambda: not any(process_alive(pid) for pid in pids.values()), timeout=30, what="the children to exit")
    # They were told to stop (SIGTERM), not killed: each retired its `workers` row.
    assert db.execute("SELECT count(*) FROM workers WHERE stopped_at IS NULL").fetchone() == (0,)


def test_processes_that_cannot_reach_the_database_end_the_supervisor(supervisors, tmp_path: Path) -> None:
    sup = supervisors(
        tmp_path, "postgresql://kestrel:s3cret@127.0.0.1:1/nowhere", "--processes", "2", "--startup-timeout", "0.5"
    )
    assert sup.wait() == 1, sup.output
    errors = [line for line in sup.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, sup.output
    assert "could not start: cannot connect to PostgreSQL at kestrel@127.0.0.1:1/nowhere" in errors[0]
    assert "s3cret" not in sup.output and "Traceback" not in sup.output
    assert sup.output.count("event=process_started") == 2  # not restarted


def test_a_process_that_keeps_failing_to_start_is_given_up_on(supervisors, app: Kestrel, db, tmp_path: Path) -> None:
    sup, pids = two_workers(supervisors, db, app.dsn, tmp_path)
    (tmp_path / "BROKEN").touch()  # from now on the module raises on import
    os.kill(pids["wp-1"], signal.SIGKILL)

    assert sup.wait() == 1, sup.output
    errors = [line for line in sup.output.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: worker process 1/2 could not start, 3 times in a row: it exited with status 1 "
        "before it was ready (its output above says why)"
    ]
    assert "RuntimeError: procs_app is broken on purpose" in sup.output
    assert sup.output.count("event=process_started") == 2 + 3
    # The one still serving was stopped gracefully.
    assert not process_alive(pids["wp-2"])
    assert db.execute("SELECT stopped_at IS NOT NULL FROM workers WHERE worker_id = 'wp-2'").fetchone() == (True,)


def test_one_process_is_this_process_and_the_default_is_one_per_core(
    supervisors, app: Kestrel, db, tmp_path: Path
) -> None:
    one = supervisors(tmp_path, app.dsn, "--processes", "1", "--worker-id", "solo")
    wait_for(
        lambda: db.execute(LIVE).fetchall() == [("solo", one.proc.pid, 8)],
        timeout=60,
        what="the worker to register with the command's own pid",
    )
    one.proc.send_signal(signal.SIGINT)
    assert one.wait() == 0, one.output
    assert "kestrel.supervisor" not in one.output

    default = supervisors(tmp_path, app.dsn)
    live_workers(db, default, default_processes())
    default.proc.send_signal(signal.SIGINT)
    assert default.wait() == 0, default.output


def test_errors_found_before_any_process_starts_fail_at_once(supervisors, app: Kestrel, tmp_path: Path) -> None:
    (tmp_path / "noflows.py").write_text("from kestrel_core import Kestrel\napp = Kestrel()\n")
    for target, message in [
        ("no_such_module_here", "cannot import module 'no_such_module_here'"),
        ("noflows", "noflows registers no workflow"),
    ]:
        done = console("--dsn", app.dsn, "worker", target, "--processes", "3", cwd=tmp_path)
        assert done.returncode == 1 and message in done.stderr, done.stderr
        assert "event=supervisor_started" not in done.stderr


def test_help_explains_processes() -> None:
    done = console("worker", "--help", env={"COLUMNS": "250"})
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--processes" in text and "(default: one per core," in text
    assert "with --processes N: ID-1 .. ID-N" in text
