"""The public API: ``Kestrel`` (``app``) and ``AsyncKestrel`` (``async_client``). Users import
them from ``kestrel_core`` itself (its ``__all__`` is the public surface), not from here.

May import: base, db, dispatch, durable, admin, workflow, engine.
"""
