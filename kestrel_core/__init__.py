"""Kestrel: durable workflows with PostgreSQL as the only orchestrator."""

from .app import Kestrel, Workflow
from .async_client import AsyncKestrel
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
from .execution import STATUSES, TERMINAL_STATUSES, Execution
from .enqueue import EnqueueFailed
from .connection import first_line, mask_dsn
from .schedules import Schedule
from .children import ChildHandle
from .events import Event

__all__ = [
    "ActionRefused",
    "AsyncKestrel",
    "ChildFailed",
    "ChildHandle",
    "DatabaseUnavailable",
    "DuplicateStepId",
    "EnqueueFailed",
    "Execution",
    "InvalidArgument",
    "Kestrel",
    "Event",
    "KestrelError",
    "NonDeterministicChange",
    "NotFound",
    "NotSerializable",
    "STATUSES",
    "Schedule",
    "SchemaOutdated",
    "SchemaTooNew",
    "StepFailed",
    "TERMINAL_STATUSES",
    "Workflow",
    "first_line",
    "mask_dsn",
]
