-- name: replica_state
-- pg_stat_wal_receiver shows its pid to every role, its status only to pg_read_all_stats
-- members: a row with a NULL status is a receiver we may not look at (taken as streaming).
SELECT pg_is_in_recovery() AS in_recovery,
       pg_last_wal_receive_lsn()::text AS receive_lsn,
       pg_last_wal_replay_lsn()::text AS replay_lsn,
       coalesce(pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn(), false) AS caught_up,
       extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS last_replay_age_s,
       (SELECT coalesce(r.status = 'streaming', true) FROM pg_stat_wal_receiver r) AS streaming;

-- name: data_now
-- The time up to which the read server holds every commit: now() on a primary and on a replica
-- that has replayed all it received, else the commit time of the last transaction it replayed.
-- Counting "what finished before T" on a replica 30 s behind must stop at that time, not at
-- now(), or what commits on the primary in those 30 s is never counted (the metrics' counters).
-- A scalar subquery (an InitPlan, computed once): the functions are volatile, and a volatile
-- expression written in place could not bound an index scan (the finished-time indexes).
(SELECT CASE WHEN pg_is_in_recovery() AND pg_last_wal_receive_lsn() IS DISTINCT FROM pg_last_wal_replay_lsn() THEN least(now(), coalesce(pg_last_xact_replay_timestamp(), now())) ELSE now() END)
