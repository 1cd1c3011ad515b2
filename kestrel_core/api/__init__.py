"""The public API: ``Kestrel`` (``app``) and ``AsyncKestrel`` (``async_client``). Users import
them from ``kestrel_core`` itself (its ``__all__`` is the public surface), not from here.

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch, durable, admin, workflow, engine.
"""

__all__: list[str] = []
