"""What a running execution writes under its claim, each write fenced by it: step
boundaries (``boundary``), written for many executions in one statement (``group_commit``);
checkpoints (``checkpoint``: a checkpoint is a row of the ``operation_outputs`` table, the
design's name, kept); parked sleeps and approval gates (``waits``); events and child workflows
(``events``, ``children``).

May import: base, db, dispatch.
"""
