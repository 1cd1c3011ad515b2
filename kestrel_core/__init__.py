"""Kestrel: durable workflows with PostgreSQL as the only orchestrator.

This module is the engine's public surface for its users: import from ``kestrel_core`` (its ``__all__``), not
from the packages below it, whose modules may move. The front ends (kestrel_console, bench) may
also use what each package declares in its own ``__all__`` (``from kestrel_core.db import
connect``), never a module behind it; the engine's modules import each other's modules
directly, never those re-exports, so no import goes round through a package
(tests/test_architecture.py checks both). The packages, bottom first; each imports
only packages before it (each package's docstring says which; tests/test_architecture.py checks):

- ``lifecycle``: the states of an execution, an attempt and a wait, and every transition
  between statuses with the SQL that performs it;
- ``base``: the exceptions, JSON checks, the backoff policy, OpenTelemetry tracing (off until
  ``enable_tracing()``);
- ``db``: connections, the engine's SQL, migrations and the schema's functions, roles;
- ``dispatch``: enqueue, claim, leases, the sweeps;
- ``durable``: what a running execution writes under its claim (boundaries, checkpoints, waits,
  events, children);
- ``admin``: reading an execution back, operator actions, schedules, retention;
- ``workflow``: the ``ctx`` of a workflow and running one execution;
- ``engine``: the worker process;
- ``api``: ``Kestrel`` and ``AsyncKestrel``.
"""

from kestrel_core.admin.execution import Execution
from kestrel_core.admin.identity import default_operator
from kestrel_core.admin.prune import HistoryRange, PruneResult
from kestrel_core.admin.schedules import Schedule
from kestrel_core.api.app import Kestrel, Workflow
from kestrel_core.api.async_client import AsyncKestrel
from kestrel_core.base.errors import (
    ActionRefused,
    ChildFailed,
    DatabaseUnavailable,
    DuplicateStepId,
    InvalidArgument,
    KestrelError,
    NonDeterministicChange,
    NotFound,
    NotSerializable,
    SchemaOutdated,
    SchemaTooNew,
    StepFailed,
    TooLarge,
    UnauditedDecision,
)
from kestrel_core.base.masking import first_line, mask_dsn
from kestrel_core.base.tracing import TracingUnavailable, disable_tracing, enable_tracing
from kestrel_core.db.roles import RoleNames
from kestrel_core.dispatch.enqueue import MAX_DELAY, ChildKeywords, EnqueueFailed, EnqueueKeywords, EnqueueOptions
from kestrel_core.dispatch.queues import Queue
from kestrel_core.durable.children import ChildHandle
from kestrel_core.durable.events import Event
from kestrel_core.engine.settings import WorkerOptions, WorkerSettings
from kestrel_core.engine.worker import Worker
from kestrel_core.lifecycle.states import (
    LIVE_STATUSES,
    STATUSES,
    TERMINAL_STATUSES,
    AttemptOutcome,
    ExecutionStatus,
    WaitKind,
    WaitState,
)
from kestrel_core.workflow.async_context import AsyncWorkflowContext
from kestrel_core.workflow.context import Decision, WorkflowContext

__all__ = [
    "LIVE_STATUSES",
    "MAX_DELAY",
    "STATUSES",
    "TERMINAL_STATUSES",
    "ActionRefused",
    "AsyncKestrel",
    "AsyncWorkflowContext",
    "AttemptOutcome",
    "ChildFailed",
    "ChildHandle",
    "ChildKeywords",
    "DatabaseUnavailable",
    "Decision",
    "DuplicateStepId",
    "EnqueueFailed",
    "EnqueueKeywords",
    "EnqueueOptions",
    "Event",
    "Execution",
    "ExecutionStatus",
    "HistoryRange",
    "InvalidArgument",
    "Kestrel",
    "KestrelError",
    "NonDeterministicChange",
    "NotFound",
    "NotSerializable",
    "PruneResult",
    "Queue",
    "RoleNames",
    "Schedule",
    "SchemaOutdated",
    "SchemaTooNew",
    "StepFailed",
    "TooLarge",
    "TracingUnavailable",
    "UnauditedDecision",
    "WaitKind",
    "WaitState",
    "Worker",
    "WorkerOptions",
    "WorkerSettings",
    "Workflow",
    "WorkflowContext",
    "default_operator",
    "disable_tracing",
    "enable_tracing",
    "first_line",
    "mask_dsn",
]
