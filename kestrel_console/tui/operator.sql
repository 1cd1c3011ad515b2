-- name: primary_lsn
-- Where the primary's WAL is once an action committed: the screens on a replica wait until it
-- has replayed that far before they show the action's effect (``ActionOutcome.primary_lsn``). The
-- flush position: a commit that returned is flushed (synchronous_commit on); the insert position
-- may point past a page header no replay reaches until the primary writes again.
SELECT pg_current_wal_flush_lsn()::text AS lsn;
