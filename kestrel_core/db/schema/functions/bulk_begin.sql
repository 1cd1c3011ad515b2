-- bulk_begin(): its current definition (created with migration 0031).
--
-- Acting with a token: checks it (known, previewed for this action, not used up, not expired
-- before it was first used) and marks the batch started. A started batch may be resumed
-- after its token's expiry: its rows are the previewed ones, each still under its own rule.
-- Returns the batch's row.
CREATE OR REPLACE FUNCTION {schema}.bulk_begin(p_token text, p_action text, p_by text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    b bulk_batches%ROWTYPE;
    n_done integer;
    n_refused integer;
BEGIN
    SELECT * INTO b FROM bulk_batches WHERE token = p_token FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown bulk token %', quote_nullable(p_token)
            USING ERRCODE = 'KS404',
                  HINT = 'Preview first: kestrel-console ' || p_action || ' --where FILTER --dry-run';
    END IF;
    IF b.action <> p_action THEN
        RAISE EXCEPTION 'token % was previewed for %, not %', p_token, b.action, p_action
            USING ERRCODE = 'KS409';
    END IF;
    IF b.finished_at IS NOT NULL THEN
        SELECT count(*) FILTER (WHERE outcome = 'done'), count(*) FILTER (WHERE outcome = 'refused')
          INTO n_done, n_refused FROM bulk_batch_items WHERE batch_id = b.id;
        RAISE EXCEPTION 'token % was already used: batch % finished at % (% done, % refused)', p_token, b.id,
            to_char(b.finished_at, 'YYYY-MM-DD HH24:MI:SS TZ'), n_done, n_refused
            USING ERRCODE = 'KS409', HINT = 'See it with: kestrel-console bulk status ' || p_token;
    END IF;
    IF b.started_at IS NULL AND b.expires_at < now() THEN
        RAISE EXCEPTION 'token % expired at %: preview again to act on what the filter selects now', p_token,
            to_char(b.expires_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = 'KS409';
    END IF;
    IF b.started_at IS NULL THEN
        UPDATE bulk_batches SET started_at = now(), started_by = p_by WHERE id = b.id RETURNING * INTO b;
    END IF;
    RETURN to_jsonb(b);
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.bulk_begin(text, text, text) FROM PUBLIC;
