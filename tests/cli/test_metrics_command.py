"""``kestrel-console metrics``: a real process serving /metrics (text and OpenMetrics) until
SIGTERM; a bad HOST:PORT is one line and exit 2, an address in use one line and exit 1."""

from __future__ import annotations

import re
import signal
import socket
import subprocess as sp
import urllib.request

import pytest

from kestrel_console.metrics import parse_listen
from kestrel_console.metrics.server import BadListen
from kestrel_core import Kestrel
from tests.cli.script import console, started
from tests.waiting import wait_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("localhost:0", ("localhost", 0)),
        (":9464", ("0.0.0.0", 9464)),
        ("[::1]:9464", ("::1", 9464)),
        (" 127.0.0.1:80 ", ("127.0.0.1", 80)),
    ],
)
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize(
    "text", ["9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:65536", "::1:9464", "a:b:1", "[::1]", ""]
)
def test_malformed_listen_addresses(text: str) -> None:
    with pytest.raises(BadListen, match="expected HOST:PORT|from 0 to 65535"):
        parse_listen(text)


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        ("9464", "error: --listen '9464': expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464"),
        ("127.0.0.1:70000", "error: --listen '127.0.0.1:70000': the port must be from 0 to 65535"),
        (
            "no-such-host.invalid:9464",
            "error: --listen 'no-such-host.invalid:9464': unknown host 'no-such-host.invalid'",
        ),
    ],
)
def test_bad_listen_is_one_line_and_exit_2(dsn: str, listen: str, message: str) -> None:
    result = console("metrics", "--listen", listen, dsn=dsn)
    assert result.returncode == 2, result
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize(("option", "value"), [("--timeout", "0"), ("--timeout", "601"), ("--settle", "-1")])
def test_bad_timeout_or_settle_is_exit_2(dsn: str, option: str, value: str) -> None:
    result = console("metrics", option, value, dsn=dsn)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {option} {float(value)}"), result


def test_an_address_in_use_is_one_line_and_exit_1(dsn: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = console("metrics", "--listen", f"127.0.0.1:{port}", dsn=dsn)
    assert result.returncode == 1, result
    assert result.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_serves_until_sigterm(app: Kestrel, dsn: str) -> None:
    for i in range(3):
        app.enqueue("remediate", {"n": i})
    process = started("metrics", "--listen", "127.0.0.1:0", dsn=dsn, stderr=sp.PIPE)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        match = re.match(r"serving metrics on (http://127\.0\.0\.1:\d+/metrics) \(reading .*, schema kestrel\)$", first)
        assert match, first
        with urllib.request.urlopen(match[1], timeout=10) as response:
            text = response.read().decode()
        assert 'kestrel_queue_depth{queue="default",workflow="remediate"} 3.0' in text
        assert "kestrel_up 1.0" in text
        request = urllib.request.Request(match[1], headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            open_metrics = response.read().decode()
        assert 'kestrel_queue_depth{queue="default",workflow="remediate"} 3.0' in open_metrics
        assert open_metrics.endswith("# EOF\n")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert err.strip().endswith("metrics endpoint stopped")


def test_a_supervised_worker_serves_metrics_from_its_supervisor(app: Kestrel, dsn: str) -> None:
    """``worker --processes 2 --metrics-listen``: one endpoint (the supervisor's; the two worker
    processes are not given the option), which sees both workers alive; SIGTERM stops it all."""
    process = started(
        "worker",
        "tests.core.crash_app",
        "--processes",
        "2",
        "--metrics-listen",
        "127.0.0.1:0",
        dsn=dsn,
        stdout=sp.DEVNULL,
        stderr=sp.PIPE,
    )
    try:
        assert process.stderr is not None
        url = None
        while url is None:
            line = process.stderr.readline()
            assert line, "the worker exited before serving metrics"
            found = re.search(r"event=metrics_serving url=(\S+)", line)
            url = found[1] if found else None

        def alive_workers() -> float:
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
            found = re.search(r'^kestrel_workers\{state="alive"\} (\S+)$', text, re.M)
            return float(found[1]) if found else 0.0

        wait_for(lambda: alive_workers() == 2, timeout=60, what="two live workers, seen by the endpoint")
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0


def test_a_worker_with_a_bad_metrics_listen_is_one_line_and_exit_2(dsn: str) -> None:
    result = console("worker", "tests.core.crash_app", "--processes", "1", "--metrics-listen", "nowhere", dsn=dsn)
    assert result.returncode == 2, result
    assert result.stderr.endswith(
        "error: --metrics-listen 'nowhere': expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464\n"
    )


def test_other_commands_do_not_import_prometheus_client() -> None:
    """Every command builds every command's options at start-up (a worker process too): only
    ``metrics`` (and ``worker --metrics-listen``) may pay for prometheus_client's import."""
    import subprocess
    import sys

    from tests.worker_processes import ROOT

    script = "import sys, kestrel_console.cli; print('prometheus_client' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}
    )
    assert result.stdout == "False\n", result.stderr
