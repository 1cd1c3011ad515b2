"""Kestrel: durable workflows with PostgreSQL as the only orchestrator."""

from .app import Kestrel, Workflow
from .errors import (
    ActionRefused,
    DatabaseUnavailable,
    DuplicateStepId,
    InvalidArgument,
    KestrelError,
    LostOwnership,
    NotFound,
    NotSerializable,
    SchemaOutdated,
    StepFailed,
    UnknownWorkflow,
)
from .execution import STATUSES, TERMINAL_STATUSES, Execution
from .connection import mask_dsn
from .schedules import Schedule

__all__ = [
    "ActionRefused",
    "DatabaseUnavailable",
    "DuplicateStepId",
    "Execution",
    "InvalidArgument",
    "Kestrel",
    "KestrelError",
    "LostOwnership",
    "NotFound",
    "NotSerializable",
    "STATUSES",
    "Schedule",
    "SchemaOutdated",
    "StepFailed",
    "TERMINAL_STATUSES",
    "UnknownWorkflow",
    "Workflow",
    "mask_dsn",
]
