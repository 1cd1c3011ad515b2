-- fold_finished_counts(): the counters of finished executions, folded.
--
-- execution_counts holds one row per (workflow, status, block of 1,024 ids) (count_shard), so
-- that no counter row takes more than ~1,024 updates (a held snapshot keeps every version of
-- a row its updates walk). The console sums them at every refresh: left alone they grow with
-- the history (~5,900 rows at 1M finished executions, ~59,000 at 10M, up to 32,768 blocks x
-- workflows x statuses). Workers call this about once a minute: every row of a block other
-- than the p_keep newest blocks of ids (those where completions still land) is added to its
-- (workflow, status) row of shard -1, which count_shard never names, and deleted; the sums are
-- unchanged. A late completion or a prune in a folded block creates its block's row again
-- (+1 or -n), and the next fold takes it. The rows are locked in the order the step boundary
-- locks them (lock_finished_counters), so a fold and a boundary cannot deadlock.
CREATE OR REPLACE FUNCTION {schema}.fold_finished_counts(p_keep integer) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
WITH newest AS (
    SELECT {schema}.count_shard(coalesce(max(id), 0)) AS shard FROM workflow_executions
), kept AS (
    SELECT array_agg(((n.shard - k + 32768) % 32768)::smallint) AS shards
      FROM newest n, generate_series(0, greatest(p_keep, 1) - 1) AS k
), cold AS (
    SELECT c.ctid AS tid FROM execution_counts c, kept
     WHERE c.shard >= 0 AND c.shard <> ALL (kept.shards)
     ORDER BY c.workflow_name, c.status, c.shard
       FOR UPDATE OF c
), folded AS (
    DELETE FROM execution_counts c USING cold WHERE c.ctid = cold.tid
    RETURNING c.workflow_name, c.status, c.n
), added AS (
    INSERT INTO execution_counts AS c (workflow_name, status, shard, n)
    SELECT workflow_name, status, -1, sum(n) FROM folded
     GROUP BY 1, 2
     ORDER BY 1, 2
    ON CONFLICT (workflow_name, status, shard) DO UPDATE SET n = c.n + excluded.n
)
SELECT count(*)::integer FROM folded
$$;
REVOKE EXECUTE ON FUNCTION {schema}.fold_finished_counts(integer) FROM PUBLIC;
