"""Kestrel: durable workflows with PostgreSQL as the only orchestrator."""

from .app import Kestrel, Workflow
from .async_client import AsyncKestrel
from .children import ChildHandle
from .connection import first_line, mask_dsn
from .enqueue import EnqueueFailed
from .errors import (
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
)
from .events import Event
from .execution import STATUSES, TERMINAL_STATUSES, Execution
from .schedules import Schedule

__all__ = [
    "STATUSES",
    "TERMINAL_STATUSES",
    "ActionRefused",
    "AsyncKestrel",
    "ChildFailed",
    "ChildHandle",
    "DatabaseUnavailable",
    "DuplicateStepId",
    "EnqueueFailed",
    "Event",
    "Execution",
    "InvalidArgument",
    "Kestrel",
    "KestrelError",
    "NonDeterministicChange",
    "NotFound",
    "NotSerializable",
    "Schedule",
    "SchemaOutdated",
    "SchemaTooNew",
    "StepFailed",
    "Workflow",
    "first_line",
    "mask_dsn",
]
