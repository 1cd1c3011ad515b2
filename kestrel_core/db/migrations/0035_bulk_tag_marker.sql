-- Kestrel schema, version 35: a bulk batch's audit tag set only by the batch (review r44b).
--
-- Until now tag_bulk_batch() trusted the setting 'kestrel.bulk_batch', which any login may set
-- around a single action: an operator's cancel by hand was recorded as done by a batch that
-- was never begun. Now bulk_apply_chunk() (SECURITY DEFINER) writes, for the one item it is
-- acting on, a row of bulk_applying keyed by its transaction (txid_current()), and deletes it
-- once the item's action returned; the trigger tags an audit row only when such a row names
-- its execution in the same transaction, for a begun batch's item without an outcome. The
-- operator, worker and reader roles may read bulk_applying and none may write it, so no
-- setting, no session, no hand-made row can tag an action the batch did not do.
CREATE TABLE {schema}.bulk_applying (
    txid         bigint NOT NULL,
    batch_id     bigint NOT NULL REFERENCES {schema}.bulk_batches (id) ON DELETE CASCADE,
    execution_id bigint NOT NULL,
    PRIMARY KEY (txid, execution_id)
);

-- The trigger now fires on every audit row (no setting to test): one index probe of an
-- empty table for an action by hand.
DROP TRIGGER tag_bulk_batch ON {schema}.operator_actions;
CREATE TRIGGER tag_bulk_batch
    BEFORE INSERT ON {schema}.operator_actions
    FOR EACH ROW
    WHEN (NEW.execution_id IS NOT NULL)
    EXECUTE FUNCTION {schema}.tag_bulk_batch();
