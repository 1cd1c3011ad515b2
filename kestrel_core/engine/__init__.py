"""The worker process: the claim loop, runner threads and maintenance (``worker``), its
LISTEN wake-ups (``listener``), announcing it at start and retiring it (``registration``),
ticking schedules in its maintenance loop (``scheduler``), and the supervisor of N worker
processes (``supervisor``; the child's side in ``supervised``).

May import: base, db, dispatch, durable, admin, workflow.
"""
