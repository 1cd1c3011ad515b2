"""Executions in and out of workers: ``enqueue`` (rows of one statement; ``enqueue_batch``
group-commits a process's concurrent calls), users' keys and queue names (``keys``), queue
declarations and limits (``queues``), the claim (``claim``; ``limited_claim`` for queues with
limits), leases (``lease``), and the leaderless sweeps that hand work back or end it
(``sweeper``, ``deadlines``).

May import: base, db.
"""
