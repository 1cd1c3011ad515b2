"""A real Prometheus server for the tests (Debian's ``prometheus`` package): started on
loopback with a temporary config and data folder, stopped at the end; its HTTP query API."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_for


def binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``. Outside CI a missing one skips the test; in
    CI (``$CI`` set, where .ci/run installs the package) it fails it."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
    if found:
        return found
    message = f"{name} is not installed (Debian: apt-get install prometheus; .ci/run installs it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 400/422: a bad query, the body says why
            return json.loads(exc.read())

    def query(self, expr: str) -> Any:
        """The query API's answer (``status``, ``data`` or ``error``)."""
        return self.get("/api/v1/query", query=expr)

    def values(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant vector: each series' labels (without __name__, job, instance) -> value."""
        answer = self.query(expr)
        assert answer["status"] == "success", answer
        out = {}
        for series in answer["data"]["result"]:
            labels = tuple(
                sorted((k, v) for k, v in series["metric"].items() if k not in ("__name__", "job", "instance"))
            )
            out[labels] = float(series["value"][1])
        return out


@contextmanager
def prometheus(tmp_path: Path, target: str, *, interval_s: int = 1) -> Iterator[Prometheus]:
    """A Prometheus scraping ``target`` (host:port) every ``interval_s`` seconds."""
    exe = binary("prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {interval_s}s\n"
        f"  scrape_timeout: {interval_s}s\n"
        "scrape_configs:\n"
        "  - job_name: kestrel\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n",
        encoding="utf-8",
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            exe,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(f"http://127.0.0.1:{port}")
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_for(ready, timeout=30, interval=0.2, what="prometheus to be ready")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("promtool"), *args], capture_output=True, text=True, timeout=60)


def scrape(url: str, accept: str | None = None) -> str:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()
