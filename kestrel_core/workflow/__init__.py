"""Running one execution: the ``ctx`` a workflow function receives (``context``; child
workflows and events in ``flow_context``; ``async_context`` for ``async def`` workflows),
replaying and recording it to its end (``runner``), its code version (``versions``), and what
it needs of the worker hosting it (``contracts``: small Protocols, so the contexts never import
the worker nor the worker the app).

May import: base, db, dispatch, durable.
"""
