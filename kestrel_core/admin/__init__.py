"""What the app and operators do to executions besides running them: read one back
(``execution``), the audited actions approve, reject, cancel and requeue (``actions``),
schedules as rows and their cron arithmetic (``schedules``, ``cron``; the worker ticks them:
``kestrel_core.engine.scheduler``), retention (``prune``), and who is acting when an audited
action names no one (``identity``).

May import: base, db, dispatch.
"""
