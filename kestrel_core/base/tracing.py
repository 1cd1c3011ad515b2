"""OpenTelemetry traces (the optional extra ``otel``): a span per enqueue, per execution run and
per step attempt, in one trace from the request that enqueued to the workflow's last step.

Off until ``enable_tracing()`` turns it on in this process (each worker process and each
process that enqueues calls it, typically where the app's module creates its ``Kestrel``).
While off, the engine's hooks test ``state.on`` and do nothing else: OpenTelemetry is never
imported, and the engine runs without it installed.

- ``enqueued``: at ``enqueue`` (in the caller's thread or task), a PRODUCER span
  ``kestrel.enqueue NAME`` under the caller's current span; its W3C ``traceparent`` is stored
  with the execution (``workflow_executions.trace_context``, migration 0026).
- ``execution``: a worker's run of a claimed execution, a CONSUMER span ``kestrel.workflow NAME``
  whose parent is that stored context; it is the current span while the workflow runs. Each
  claim is a span of its own (a workflow that sleeps or waits for an approval and resumes has
  one per run, all in the same trace).
- ``step``: one attempt of a step, a span ``kestrel.step STEP`` under the execution's; a failed
  attempt records its exception and an error status. Steps replayed from their checkpoints run
  nothing and make no span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from kestrel_core.base.describe import exception_head
from kestrel_core.base.errors import KestrelError

T = TypeVar("T")

INSTRUMENTATION = "kestrel"
INSTALL_HINT = "pip install 'kestrel[otel]'"


@dataclass
class _State:
    on: bool = False
    tracer: Any = None  # an opentelemetry.trace.Tracer while on


state = _State()
OFF: AbstractContextManager[None] = nullcontext()


class TracingUnavailable(KestrelError):
    """enable_tracing() without OpenTelemetry installed."""


def enable_tracing(tracer_provider: Any = None) -> None:
    """Trace enqueues, executions and step attempts in this process, with ``tracer_provider``
    (default: OpenTelemetry's global one, which the application configures with its exporter).
    TracingUnavailable when OpenTelemetry is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise TracingUnavailable(f"tracing needs OpenTelemetry, which is not installed: {INSTALL_HINT}") from None
    state.tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)
    state.on = True


def disable_tracing() -> None:
    """Stop tracing in this process (spans already started end as usual)."""
    state.on = False
    state.tracer = None


def enqueued(name: str, count: int) -> str | None:
    """A span for an enqueue of ``count`` executions of ``name`` under the caller's current
    span (a new trace if none); the W3C traceparent to store with them."""
    tracer = state.tracer
    if tracer is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    span = tracer.start_span(
        f"kestrel.enqueue {name}",
        kind=trace.SpanKind.PRODUCER,
        attributes={"kestrel.workflow": name, "kestrel.count": count},
    )
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=trace.set_span_in_context(span))
    span.end()
    return carrier.get("traceparent")


def execution(
    name: str, execution_id: int, claim_epoch: int, traceparent: str | None, *, benign: type[BaseException]
) -> AbstractContextManager[None]:
    """The span of one run of a claimed execution, current while it runs. ``benign``: the
    exception that stops a run without failing it (the engine's unwinding: parked, lost,
    shutdown), unless its ``error`` is set."""
    if not state.on:
        return OFF
    return _execution(name, execution_id, claim_epoch, traceparent, benign)


@contextmanager
def _execution(
    name: str, execution_id: int, claim_epoch: int, traceparent: str | None, benign: type[BaseException]
) -> Iterator[None]:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent}) if traceparent else None
    with state.tracer.start_as_current_span(
        f"kestrel.workflow {name}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes={"kestrel.workflow": name, "kestrel.execution_id": execution_id, "kestrel.claim": claim_epoch},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except benign as exc:
            error = getattr(exc, "error", None)
            span.set_attribute("kestrel.outcome", str(getattr(exc, "reason", "unwound")))
            if error is not None:
                _failed(span, error)
            raise
        except BaseException as exc:
            span.set_attribute("kestrel.outcome", "error")
            _failed(span, exc)
            raise
        span.set_attribute("kestrel.outcome", "returned")


def in_step(step_id: str, attempt: int, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` inside the span of attempt ``attempt`` of step ``step_id``. The hooks
    call it only while tracing is on (``if tracing.state.on``): off, a step attempt pays one
    attribute test."""
    with _step(step_id, attempt):
        return call(*args)


async def in_step_async(step_id: str, attempt: int, work: Awaitable[T]) -> T:
    """``await work`` inside the span of attempt ``attempt`` of step ``step_id`` (tracing on)."""
    with _step(step_id, attempt):
        return await work


@contextmanager
def _step(step_id: str, attempt: int) -> Iterator[None]:
    with state.tracer.start_as_current_span(
        f"kestrel.step {step_id}",
        attributes={"kestrel.step": step_id, "kestrel.attempt": attempt},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            _failed(span, exc)
            raise


def _failed(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    try:
        span.record_exception(exc)
    except Exception:  # its str() raised: the status below still says what it was
        pass
    span.set_status(Status(StatusCode.ERROR, exception_head(exc)))
