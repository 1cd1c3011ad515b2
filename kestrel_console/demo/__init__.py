"""``kestrel-console demo``: a private database, demo workers and a trickle of realistic workflows.

- :mod:`.workflows`: the demo Kestrel app (incident remediation, provisioning, CI pipeline);
- :mod:`.trickle`: enqueues a seed burst, then a steady trickle of those workflows;
- :mod:`.bot`: a "bot operator" that decides some approval gates and leaves the rest to you;
- :mod:`.database`: the configured database, else a private PostgreSQL (``--fresh``, attaching);
- :mod:`.runner`: starts the database, workers, trickle and bot, and stops them in order.
"""
