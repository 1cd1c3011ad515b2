"""Running one execution: the ``ctx`` a workflow function receives (``context``; child
workflows and events in ``flow_context``; ``async_context`` for ``async def`` workflows),
replaying and recording it to its end (``runner``), its code version (``versions``), and what
it needs of the worker hosting it (``contracts``: small Protocols, so the contexts never import
the worker nor the worker the app).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch, durable.
"""

__all__: list[str] = []
