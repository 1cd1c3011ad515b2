-- count_shard(): which execution_counts row of its (workflow, status) counts an execution.
--
-- A block of 1,024 consecutive ids per row (wrapping after 32,768 blocks), not id % 16: a
-- counter row is then updated at most ~1,024 times per status before the ids move on to the
-- next row. Every update leaves a dead version behind, and while a snapshot holds the vacuum
-- horizon back none is removed: 16 rows updated at every completion grew chains of versions
-- and index entries that each bump (inside the step boundary's transaction, under the
-- counters' locks) walked, slower with every minute of the hold. Readers sum the
-- rows, so the shard is invisible to them; rows counted under id % 16 keep their counts.
CREATE OR REPLACE FUNCTION {schema}.count_shard(p_id bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ((p_id / 1024) % 32768)::smallint
$$;
