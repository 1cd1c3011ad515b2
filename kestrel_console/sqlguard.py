"""Kept for importers of the old module: the guard lives in ``kestrel_console.adhoc.guard``."""

from .adhoc.guard import QueryRefused, check_read_only

__all__ = ["QueryRefused", "check_read_only"]
