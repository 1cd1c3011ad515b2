-- tag_bulk_batch(): its current definition (created with migration 0031, marker since 0035).
--
-- The trigger of operator_actions that names the bulk batch an audited action belongs to.
-- bulk_apply_chunk() (SECURITY DEFINER) writes a row of bulk_applying for the item it is
-- acting on, keyed by its transaction, and deletes it once the item's action returned: the
-- row is tagged only when its execution is that item, in that transaction, of a begun batch,
-- and the item has no outcome yet. No login but the owner may write bulk_applying: a setting
-- or a session made by hand around a single action tags nothing.
CREATE OR REPLACE FUNCTION {schema}.tag_bulk_batch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
BEGIN
    SELECT a.batch_id INTO NEW.batch_id
      FROM bulk_applying a
      JOIN bulk_batches b ON b.id = a.batch_id AND b.started_at IS NOT NULL
      JOIN bulk_batch_items i ON i.batch_id = a.batch_id AND i.execution_id = a.execution_id
     WHERE a.txid = txid_current() AND a.execution_id = NEW.execution_id AND i.outcome IS NULL;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.tag_bulk_batch() FROM PUBLIC;
