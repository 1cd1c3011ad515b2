"""Base: what every layer of the engine uses: its exceptions (``errors``: each says what is
wrong and what to do), the JSON checks of inputs and outputs (``serialization``) and the one
backoff policy of every retry loop (``backoff``).

May import: nothing of kestrel_core outside this package.
"""
