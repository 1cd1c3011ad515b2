"""A finished span as the tracing tests compare it, the same from the test process
(InMemorySpanExporter) and from a worker process (tests/core/traced_app.py writes these)."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    """What the test checks of a span, the same from either process."""
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "events": [e.name for e in span.events],
        "pid": os.getpid(),
    }
