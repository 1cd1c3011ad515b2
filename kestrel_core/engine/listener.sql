-- engine/listener.py: the wake-up listener.

-- name: listen
-- The schema's channel ({channel}: ``kestrel:<schema>``, an identifier composed by listener.py),
-- on which enqueues and wake-ups are announced.
LISTEN {channel};
