"""The README's "Metrics and alerts" commands, run as written: the endpoint on
127.0.0.1:9464 serves the queue depth, and ``status --format json --all`` prints the same."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess as sp
import urllib.request

from kestrel_core import Kestrel
from tests.cli.script import SCRIPT, console, environment
from tests.readme_blocks import blocks, commands
from tests.waiting import wait_for


def test_the_readme_metrics_commands_as_written(app: Kestrel, dsn: str) -> None:
    (block,) = blocks("Metrics and alerts", "bash")
    serve, status = commands(block)
    url = re.search(r"http://\S+/metrics", block)[0]
    for i in range(2):
        app.enqueue("remediate", {"pod": f"api-{i}"})
    argv = shlex.split(serve)
    assert argv[0] == "kestrel-console"
    process = sp.Popen([str(SCRIPT), "--dsn", dsn, *argv[1:]], stderr=sp.PIPE, text=True, env=environment())
    try:

        def scraped() -> str | None:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return response.read().decode()
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                return None

        text = wait_for(scraped, timeout=30, what=f"{url} to answer")
        assert 'kestrel_queue_depth{queue="default",workflow="remediate"} 2.0' in text
        result = console(*shlex.split(status)[1:], dsn=dsn)
        assert result.returncode == 0, result.stderr
        enqueued = json.loads(result.stdout)["enqueued"]
        assert enqueued == [
            {
                "queue": "default",
                "workflow_name": "remediate",
                "enqueued": 2,
                "due": 2,
                "oldest_due_age_s": enqueued[0]["oldest_due_age_s"],
            }
        ]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except sp.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0
