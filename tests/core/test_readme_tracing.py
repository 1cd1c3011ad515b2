"""The README's "Tracing" block, run as written in a process of its own (its ConsoleSpanExporter
prints each span as JSON), then a workflow enqueued under a request's span and run by a worker
there: the printed spans are one trace, from the request to the step."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.readme_blocks import blocks
from tests.worker_processes import ROOT

AFTER = """
import time

@app.workflow("hello")
def hello(ctx, who):
    return ctx.step("greet", lambda: f"hello {who}")

with trace.get_tracer("web").start_as_current_span("POST /hello"):
    eid = app.enqueue("hello", "world")
worker = app.worker(concurrency=1, poll_interval=0.1)
worker.start()
deadline = time.monotonic() + 30
while app.get(eid).status != "success":
    assert time.monotonic() < deadline, app.get(eid).status
    time.sleep(0.05)
worker.stop()
provider.shutdown()
"""


def test_the_readme_tracing_block_as_written(dsn: str) -> None:
    (block,) = blocks("Tracing", "python")
    result = subprocess.run(
        [sys.executable, "-c", block + AFTER],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "KESTREL_DSN": dsn},
    )
    assert result.returncode == 0, result.stderr
    spans = [json.loads(chunk) for chunk in result.stdout.replace("}\n{", "}\x00{").split("\x00") if chunk.strip()]
    names = {s["name"]: s for s in spans}
    assert set(names) == {"POST /hello", "kestrel.enqueue hello", "kestrel.workflow hello", "kestrel.step greet"}
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    assert names["kestrel.step greet"]["parent_id"] == names["kestrel.workflow hello"]["context"]["span_id"]
    assert names["kestrel.workflow hello"]["parent_id"] == names["kestrel.enqueue hello"]["context"]["span_id"]
