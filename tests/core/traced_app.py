"""A Kestrel app with OpenTelemetry tracing on, run in a worker subprocess by
tests/core/test_tracing.py: every span it ends is written at once, one JSON line each, to the
file ``$KESTREL_TEST_SPANS`` names (a SpanExporter of its own, behind a SimpleSpanProcessor)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from datetime import timedelta

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from kestrel_core import Kestrel, enable_tracing
from tests.core.span_record import as_dict


class JsonLinesExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(json.dumps(as_dict(span)) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.environ["KESTREL_TEST_SPANS"])))
enable_tracing(provider)

app = Kestrel()
flaky_failed = threading.Event()


def flaky() -> str:
    if not flaky_failed.is_set():
        flaky_failed.set()
        raise RuntimeError("first attempt fails")
    return "fixed"


@app.workflow("remediate")
def remediate(ctx, alert):
    rca = ctx.step("rca", lambda: {"cause": "leak", "pod": alert["pod"]})
    ctx.sleep("cool-down", timedelta(milliseconds=200))
    fix = ctx.step("fix", flaky, retries=2, backoff=0.05)
    return {"rca": rca, "fix": fix, "pr": ctx.step("open-pr", lambda: "pr-42")}
