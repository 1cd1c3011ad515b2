"""Base: what every layer of the engine uses: its exceptions (``errors``: each says what is
wrong and what to do), the JSON checks of inputs and outputs (``serialization``), the one
backoff policy of every retry loop (``backoff``) and the password masking every log line and
error message goes through (``masking``: ``mask_dsn``, ``first_line``), the description of
what a step or workflow raised, safe to print and to store (``describe``), an execution's
statuses as lists and SQL literals (``statuses``, from ``lifecycle``), the latch the hot path's
threads wait on (``latch``: a cheaper ``threading.Event``), and OpenTelemetry spans
(``tracing``: off, and OpenTelemetry never imported, until ``enable_tracing()``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: lifecycle.
"""

from kestrel_core.base.backoff import Backoff
from kestrel_core.base.serialization import to_json

__all__ = ["Backoff", "to_json"]
