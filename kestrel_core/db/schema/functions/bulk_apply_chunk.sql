-- bulk_apply_chunk(): its current definition (created with migration 0031, marker since 0035).
--
-- Acts on up to p_limit rows of a begun batch that have no outcome yet, in one transaction:
-- each through its single-row operator function (the registry below: one branch per bulk
-- action, kestrel_core/admin/bulk.py ACTIONS holds the same names), whose state rule holds.
-- A refusal (KS404/KS409) is recorded with its message; a deadlock with a worker is tried
-- again. Each row's outcome commits with its action, so a chunk cut short changes nothing and
-- the batch resumes where it was. Rows another session is acting on are skipped (SKIP LOCKED):
-- several consoles may apply one batch at once. The audit rows carry the batch's id
-- (tag_bulk_batch): around each item's action, a row of bulk_applying (this transaction, the
-- batch, the item) that only this function writes says the action is the batch's. Returns {"done", "refused", "left"}: this chunk's counts, and the batch's
-- rows without an outcome now; the batch is marked finished when none is left.
CREATE OR REPLACE FUNCTION {schema}.bulk_apply_chunk(p_batch bigint, p_by text, p_comment text, p_limit integer)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    b bulk_batches%ROWTYPE;
    v_id bigint;
    v_result jsonb;
    v_message text;
    v_done integer := 0;
    v_refused integer := 0;
    v_left integer;
    tries integer;
BEGIN
    SELECT * INTO b FROM bulk_batches WHERE id = p_batch;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no bulk batch %', p_batch USING ERRCODE = 'KS404';
    END IF;
    IF b.started_at IS NULL THEN
        RAISE EXCEPTION 'bulk batch % was not begun with its token', p_batch USING ERRCODE = 'KS409';
    END IF;
    IF b.action NOT IN ('cancel', 'requeue', 'fork', 'pause', 'resume') THEN
        RAISE EXCEPTION 'this schema has no bulk action %', quote_literal(b.action) USING ERRCODE = '22023';
    END IF;
    FOR v_id IN
        SELECT i.execution_id FROM bulk_batch_items i
         WHERE i.batch_id = p_batch AND i.outcome IS NULL
         ORDER BY i.execution_id LIMIT greatest(p_limit, 1)
           FOR UPDATE SKIP LOCKED
    LOOP
        tries := 0;
        LOOP
            BEGIN
                INSERT INTO bulk_applying (txid, batch_id, execution_id) VALUES (txid_current(), p_batch, v_id);
                IF b.action = 'cancel' THEN
                    v_result := jsonb_build_object('was', cancel_execution(v_id, p_by, p_comment));
                ELSIF b.action = 'requeue' THEN
                    v_result := jsonb_build_object('was', requeue_execution(v_id, p_by, p_comment));
                ELSIF b.action = 'fork' THEN
                    v_result := jsonb_build_object('fork_id', fork_execution(
                        v_id, b.params ->> 'from_step', NULL, false, b.params ->> 'version', p_by, p_comment));
                ELSIF b.action = 'pause' THEN
                    v_result := jsonb_build_object('was', pause_execution(v_id, p_by, p_comment));
                ELSIF b.action = 'resume' THEN
                    v_result := jsonb_build_object('now', resume_execution(v_id, p_by, p_comment));
                END IF;
                DELETE FROM bulk_applying WHERE txid = txid_current() AND execution_id = v_id;
                UPDATE bulk_batch_items
                   SET outcome = 'done', result = v_result, acted_at = clock_timestamp(), acted_by = p_by
                 WHERE batch_id = p_batch AND execution_id = v_id;
                v_done := v_done + 1;
                EXIT;
            EXCEPTION
                WHEN SQLSTATE 'KS404' OR SQLSTATE 'KS409' THEN
                    GET STACKED DIAGNOSTICS v_message = MESSAGE_TEXT;
                    UPDATE bulk_batch_items
                       SET outcome = 'refused', reason = v_message, acted_at = clock_timestamp(), acted_by = p_by
                     WHERE batch_id = p_batch AND execution_id = v_id;
                    v_refused := v_refused + 1;
                    EXIT;
                WHEN deadlock_detected THEN
                    -- A worker finishing this row (or a child of it) locked in the other order:
                    -- the row's attempt was rolled back; try it again.
                    tries := tries + 1;
                    IF tries >= 5 THEN
                        RAISE;
                    END IF;
            END;
        END LOOP;
    END LOOP;
    SELECT count(*) INTO v_left FROM bulk_batch_items WHERE batch_id = p_batch AND outcome IS NULL;
    IF v_left = 0 THEN
        UPDATE bulk_batches SET finished_at = clock_timestamp() WHERE id = p_batch AND finished_at IS NULL;
    END IF;
    RETURN jsonb_build_object('done', v_done, 'refused', v_refused, 'left', v_left);
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.bulk_apply_chunk(bigint, text, text, integer) FROM PUBLIC;
