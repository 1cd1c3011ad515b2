-- Fork (issue 47): a new execution from a chosen step of an existing one. The link between a
-- fork and its origin, readable both ways (`show`, the console), in a table of its own: the
-- history's partitioned tables keep their columns. The audit's list of actions gains 'fork'.
CREATE TABLE {schema}.execution_forks (
    fork_id bigint PRIMARY KEY,
    origin_id bigint NOT NULL,
    from_step text NOT NULL,
    forked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX execution_forks_origin_idx ON {schema}.execution_forks (origin_id);

DO $$
DECLARE
    allowed text[];
BEGIN
    SELECT coalesce(array_agg(DISTINCT v), '{}') INTO allowed
      FROM pg_constraint c,
           regexp_matches(pg_get_constraintdef(c.oid), '''([^'']+)''', 'g') AS m,
           unnest(CASE WHEN m[1] LIKE '{%}' THEN m[1]::text[] ELSE ARRAY[m[1]] END) AS v
     WHERE c.conrelid = '{schema}.operator_actions'::regclass
       AND c.conname = 'operator_actions_action_check';
    allowed := array(SELECT DISTINCT unnest(allowed || ARRAY['fork']) ORDER BY 1);
    ALTER TABLE {schema}.operator_actions DROP CONSTRAINT IF EXISTS operator_actions_action_check;
    EXECUTE format('ALTER TABLE {schema}.operator_actions ADD CONSTRAINT operator_actions_action_check '
                   'CHECK (action IN (%s))',
                   (SELECT string_agg(quote_literal(a), ', ') FROM unnest(allowed) AS a));
END
$$;
