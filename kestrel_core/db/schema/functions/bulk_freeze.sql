-- bulk_freeze(): its current definition (created with migration 0031).
--
-- The preview of a bulk action: freezes the given execution ids (what the console's filter
-- selected, read just before) under a new random token, with the action and its parameters,
-- valid for p_ttl. Audited (action 'bulk'). Returns the batch: id, token, total (distinct
-- ids), expires_at. Acting needs the token (bulk_begin) and acts on exactly these ids.
CREATE OR REPLACE FUNCTION {schema}.bulk_freeze(
    p_action text, p_params jsonb, p_ids bigint[], p_filter text, p_by text, p_ttl interval
) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    b bulk_batches%ROWTYPE;
    n integer;
BEGIN
    IF p_action IS NULL OR p_action !~ '^[a-z_]+$' THEN
        RAISE EXCEPTION 'no bulk action %', quote_nullable(p_action) USING ERRCODE = '22023';
    END IF;
    IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '7 days' THEN
        RAISE EXCEPTION 'a bulk token lives from a second to 7 days, not %', p_ttl USING ERRCODE = '22023';
    END IF;
    SELECT count(DISTINCT i) INTO n FROM unnest(p_ids) AS i WHERE i IS NOT NULL;
    IF n = 0 THEN
        RAISE EXCEPTION 'cannot preview a bulk %: no execution selected', p_action USING ERRCODE = 'KS409';
    END IF;
    INSERT INTO bulk_batches (token, action, params, filter_text, total, created_by, expires_at)
    VALUES (gen_random_uuid()::text, p_action, coalesce(p_params, '{}'), p_filter, n, p_by, now() + p_ttl)
    RETURNING * INTO b;
    -- The id makes it readable, the random part unguessable (and a typo fails, not acts).
    b.token := 'b' || b.id || '-' || left(md5(gen_random_uuid()::text), 12);
    UPDATE bulk_batches SET token = b.token WHERE id = b.id;
    INSERT INTO bulk_batch_items (batch_id, execution_id)
    SELECT DISTINCT b.id, i FROM unnest(p_ids) AS i WHERE i IS NOT NULL;
    INSERT INTO operator_actions (actor, db_user, action, comment, details)
    VALUES (p_by, session_user, 'bulk', NULL,
            jsonb_build_object('batch_id', b.id, 'action', p_action, 'params', b.params, 'total', n,
                               'filter', p_filter, 'expires_at', b.expires_at));
    RETURN jsonb_build_object('batch_id', b.id, 'token', b.token, 'total', n, 'expires_at', b.expires_at);
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.bulk_freeze(text, jsonb, bigint[], text, text, interval) FROM PUBLIC;
