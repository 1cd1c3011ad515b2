"""The private PostgreSQL server: create, start, stop, crash, reuse, and the errors users see.

Most tests share the module's ``private_cluster`` (one initdb per module) and each uses its
own table; the fixture restarts the server if an earlier test left it stopped or killed.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from kestrel_console.embedded_pg import (
    EmbeddedPostgresError,
    LocalCluster,
    account,
    binaries,
    default_data_dir,
    find_bin_dir,
)
from kestrel_core import KestrelError
from tests.conftest import reachable

AS_ROOT = os.geteuid() == 0


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A fresh directory directly under the temp dir, open to the server's OS user (as root
    that is ``postgres``); any server left running in it is stopped afterwards."""
    path = Path(tempfile.mkdtemp(prefix="kestrel-pg-test-"))
    path.chmod(0o755)
    yield path
    for data_dir in [path, *path.iterdir()]:
        if (data_dir / "postmaster.pid").exists():
            LocalCluster(data_dir).destroy()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def table(private_cluster: LocalCluster) -> str:
    """A table of this test's own, holding one committed row (value 1)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(private_cluster.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} (x int)")
        conn.execute(f"INSERT INTO {name} VALUES (1)")
    return name


def rows(cluster: LocalCluster, table: str) -> list[tuple[int]]:
    with psycopg.connect(cluster.dsn, connect_timeout=5) as conn:
        return conn.execute(f"SELECT x FROM {table} ORDER BY x").fetchall()


def listening_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port may be in TIME_WAIT
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_started_server_answers_on_localhost_and_its_own_socket(private_cluster: LocalCluster) -> None:
    cluster = private_cluster
    assert cluster.is_running()
    assert (cluster.data_dir / "PG_VERSION").read_text().strip() == cluster.version
    assert conninfo_to_dict(cluster.dsn) == {
        "host": "127.0.0.1",
        "port": str(cluster.port),
        "user": "postgres",
        "dbname": "postgres",
    }
    with psycopg.connect(cluster.dsn, connect_timeout=5) as conn:
        assert conn.execute("SELECT 6 * 7").fetchone() == (42,)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        assert conn.execute("SHOW port").fetchone() == (str(cluster.port),)
        assert conn.execute("SHOW fsync").fetchone() == ("off",)  # durable=False
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone() == (
            int(cluster.version),
        )
    unix = psycopg.connect(host=str(cluster.data_dir), port=cluster.port, user="postgres", dbname="postgres")
    with unix:
        assert unix.execute("SELECT 1").fetchone() == (1,)
    if AS_ROOT:
        assert cluster.data_dir.stat().st_uid == pwd.getpwnam("postgres").pw_uid


def test_create_database_returns_its_dsn_and_is_idempotent(private_cluster: LocalCluster) -> None:
    name = f"kestrel_embedded_{uuid.uuid4().hex[:8]}"
    dsn = private_cluster.create_database(name)
    assert private_cluster.create_database(name) == dsn
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (name,)


def test_stop_makes_connections_fail_until_started_again(private_cluster: LocalCluster, table: str) -> None:
    private_cluster.stop()
    assert not private_cluster.is_running()
    assert not reachable(private_cluster.dsn)
    private_cluster.stop()  # already stopped: nothing to do

    private_cluster.start()
    assert private_cluster.is_running()
    assert rows(private_cluster, table) == [(1,)]


def test_restart_keeps_committed_data(private_cluster: LocalCluster, table: str) -> None:
    with psycopg.connect(private_cluster.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (2)")
        started = conn.execute("SELECT pg_postmaster_start_time()").fetchone()

    private_cluster.restart()

    assert rows(private_cluster, table) == [(1,), (2,)]
    with psycopg.connect(private_cluster.dsn) as conn:
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone() != started


def test_kill_crashes_the_server_and_start_recovers_committed_data(private_cluster: LocalCluster, table: str) -> None:
    with psycopg.connect(private_cluster.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (2)")  # committed just before the crash
        private_cluster.kill()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    assert not private_cluster.is_running()
    assert not reachable(private_cluster.dsn)
    log_before = private_cluster.log_file.stat().st_size

    private_cluster.start()

    assert rows(private_cluster, table) == [(1,), (2,)]
    with private_cluster.log_file.open() as log:
        log.seek(log_before)
        assert "automatic recovery in progress" in log.read()


def test_immediate_stop_also_needs_recovery(private_cluster: LocalCluster, table: str) -> None:
    private_cluster.stop("immediate")
    assert not reachable(private_cluster.dsn)
    log_before = private_cluster.log_file.stat().st_size

    private_cluster.start()

    assert rows(private_cluster, table) == [(1,)]
    with private_cluster.log_file.open() as log:
        log.seek(log_before)
        assert "automatic recovery in progress" in log.read()
    with pytest.raises(ValueError, match="stop mode"):
        private_cluster.stop("gently")


def test_reusing_a_data_dir_keeps_its_data_and_port(private_cluster: LocalCluster, table: str) -> None:
    port = private_cluster.port
    private_cluster.stop()
    pg_version = (private_cluster.data_dir / "PG_VERSION").stat().st_mtime_ns

    again = LocalCluster(private_cluster.data_dir, durable=False)
    assert again.port == port  # known before starting: the dsn is usable in advance
    again.start()

    assert again.port == port
    assert rows(again, table) == [(1,)]
    assert (private_cluster.data_dir / "PG_VERSION").stat().st_mtime_ns == pg_version  # no new initdb
    assert private_cluster.is_running()  # both objects see the same server


def test_reused_data_dir_moves_to_a_free_port_when_its_own_is_taken(private_cluster: LocalCluster, table: str) -> None:
    old_port = private_cluster.port
    private_cluster.stop()
    messages: list[str] = []
    with listening_socket(old_port):
        again = LocalCluster(private_cluster.data_dir, durable=False, log=messages.append)
        again.start()
        assert again.port != old_port
        assert rows(again, table) == [(1,)]
    assert any(f"port {old_port} is taken" in message for message in messages)
    assert LocalCluster(private_cluster.data_dir).port == again.port  # remembered


def test_start_failure_quotes_the_server_log(private_cluster: LocalCluster) -> None:
    private_cluster.stop()
    with listening_socket() as busy:
        port = busy.getsockname()[1]
        pinned = LocalCluster(private_cluster.data_dir, port=port, durable=False)
        with pytest.raises(EmbeddedPostgresError) as failure:
            pinned.start(timeout=10)
    message = str(failure.value)
    assert "Address already in use" in message  # from the server log
    assert str(private_cluster.log_file) in message
    assert not pinned.is_running()


def test_context_manager_creates_starts_and_stops(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "demo-pg"
    messages: list[str] = []
    with LocalCluster(data_dir, durable=False, log=messages.append) as cluster:
        dsn = cluster.create_database("kestrel_demo")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("kestrel_demo",)
    assert not cluster.is_running()
    assert not reachable(cluster.dsn)
    assert any("creating a PostgreSQL" in message for message in messages)
    assert any("starting PostgreSQL" in message for message in messages)
    with pytest.raises(EmbeddedPostgresError, match="call start"):
        cluster.create_database("other")


def test_context_manager_leaves_a_server_it_did_not_start_running(private_cluster: LocalCluster) -> None:
    with LocalCluster(private_cluster.data_dir, durable=False) as cluster:
        assert cluster.port == private_cluster.port
    assert private_cluster.is_running()


def test_init_refuses_a_non_empty_directory_without_a_cluster(scratch_dir: Path) -> None:
    (scratch_dir / "notes.txt").write_text("mine")
    cluster = LocalCluster(scratch_dir)
    with pytest.raises(EmbeddedPostgresError, match="not empty and holds no PostgreSQL cluster"):
        cluster.init()
    assert (scratch_dir / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not AS_ROOT, reason="the server's OS user differs from ours only as root")
def test_as_root_a_data_dir_the_postgres_user_cannot_reach_is_refused(scratch_dir: Path) -> None:
    scratch_dir.chmod(0o700)  # root's, closed to others
    data_dir = scratch_dir / "inner" / "pg"
    with pytest.raises(EmbeddedPostgresError) as failure:
        LocalCluster(data_dir).init()
    assert f"cannot enter {scratch_dir}" in str(failure.value)
    assert "KESTREL_DEMO_DIR" in str(failure.value)
    assert not (scratch_dir / "inner").exists()  # refused before creating anything


def test_a_bad_bin_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedPostgresError) as failure:
        LocalCluster(tmp_path / "pg", bin_dir=tmp_path)
    assert isinstance(failure.value, KestrelError)
    message = str(failure.value)
    assert f"bin_dir {tmp_path} has no PostgreSQL server binaries" in message
    assert "initdb, pg_ctl, postgres" in message


def test_a_bad_kestrel_pg_bin_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KESTREL_PG_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(EmbeddedPostgresError, match=r"\$KESTREL_PG_BIN .*nowhere has no PostgreSQL"):
        LocalCluster(tmp_path / "pg")


def test_binaries_are_found_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KESTREL_PG_BIN", raising=False)
    found = find_bin_dir()
    for name in ("initdb", "pg_ctl", "postgres"):
        assert os.access(found / name, os.X_OK)

    monkeypatch.setenv("KESTREL_PG_BIN", str(found))
    assert find_bin_dir() == found

    # Only PATH left to search.
    monkeypatch.delenv("KESTREL_PG_BIN")
    monkeypatch.setattr(binaries, "SYSTEM_BIN_GLOBS", ())
    monkeypatch.setenv("PATH", str(found))
    assert find_bin_dir() == found


def test_no_binaries_anywhere_says_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KESTREL_PG_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(binaries, "SYSTEM_BIN_GLOBS", ())
    monkeypatch.setattr(binaries, "pgserver_bin_dir", lambda: None)
    with pytest.raises(EmbeddedPostgresError) as failure:
        find_bin_dir()
    assert "pip install 'kestrel[embedded]'" in str(failure.value)
    assert "KESTREL_PG_BIN" in str(failure.value)


def test_pgserver_binaries_are_the_last_resort(
    tmp_path: Path, scratch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pgserver", reason="optional extra kestrel[embedded] not installed")
    monkeypatch.delenv("KESTREL_PG_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(binaries, "SYSTEM_BIN_GLOBS", ())
    with LocalCluster(scratch_dir / "pg", durable=False) as cluster:
        assert "pgserver" in str(cluster.bin_dir)
        with psycopg.connect(cluster.dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_default_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KESTREL_DEMO_DIR", str(tmp_path / "mine"))
    assert default_data_dir() == tmp_path / "mine"

    monkeypatch.delenv("KESTREL_DEMO_DIR")
    monkeypatch.setattr(account, "running_as_root", lambda: True)
    assert default_data_dir() == Path("/var/lib/kestrel/demo-pg")

    monkeypatch.setattr(account, "running_as_root", lambda: False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "kestrel" / "demo-pg"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_data_dir() == Path.home() / ".local" / "share" / "kestrel" / "demo-pg"


def test_settings_are_validated_and_applied(scratch_dir: Path) -> None:
    with pytest.raises(ValueError, match="invalid PostgreSQL setting name"):
        LocalCluster(scratch_dir, settings={"work_mem = 1; fsync": "off"})
    cluster = LocalCluster(
        scratch_dir / "pg", durable=False, settings={"application_name": "it's kestrel", "jit": False}
    )
    with cluster:
        with psycopg.connect(cluster.dsn) as conn:
            assert conn.execute("SHOW jit").fetchone() == ("off",)
            assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("it's kestrel",)


def test_a_cluster_of_another_major_version_is_refused(scratch_dir: Path) -> None:
    (scratch_dir / "PG_VERSION").write_text("9.6\n")
    cluster = LocalCluster(scratch_dir)
    with pytest.raises(EmbeddedPostgresError) as failure:
        cluster.start()
    message = str(failure.value)
    assert (
        f"created by PostgreSQL 9.6 but the binaries in {cluster.bin_dir} are PostgreSQL {cluster.version}" in message
    )
    assert "KESTREL_PG_BIN" in message
    assert sorted(path.name for path in scratch_dir.iterdir()) == ["PG_VERSION"]  # left untouched
