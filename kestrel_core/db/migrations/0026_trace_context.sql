-- Kestrel schema, version 26: the trace context of an execution (issue 47).
--
-- With OpenTelemetry tracing on (kestrel_core.enable_tracing), enqueue records the W3C
-- traceparent of the span it made under the caller's ("00-<trace id>-<span id>-<flags>"), and
-- the worker that runs the execution starts its span as a child of it: the request that
-- enqueued and the workflow it started share one trace, across processes. NULL when tracing is
-- off (no cost: the enqueue sends a NULL array). A nullable column without a default: adding
-- it rewrites nothing and takes a brief lock.
ALTER TABLE {schema}.workflow_executions ADD COLUMN trace_context text;
