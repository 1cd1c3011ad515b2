-- Kestrel schema, version 39: each worker says at its heartbeat how many of its slots are free.
--
-- The workers that poll for work (a worker polls only with a free slot) share their polls
-- among themselves (kestrel_core/engine/fleet.py): the count of pollers is the live workers
-- claiming the same work with a free slot at their last beat. NULL (a worker of an older
-- version, or not beaten yet) counts as not polling: the others then poll as often as before.
-- In place and cheap: a nullable column without a default is a catalog change.
ALTER TABLE {schema}.workers ADD COLUMN free_slots integer;
