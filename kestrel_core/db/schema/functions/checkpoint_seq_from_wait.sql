-- checkpoint_seq_from_wait(): its current definition (created by migration 0008).
--
-- A checkpoint written for a wait by someone other than the workflow (a decision, the
-- sweeper, a wake-up) takes the position the wait was parked at.
CREATE OR REPLACE FUNCTION {schema}.checkpoint_seq_from_wait() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.seq := (SELECT w.seq FROM {schema}.workflow_waits w
                 WHERE w.execution_id = NEW.execution_id AND w.step_id = NEW.step_id);
    RETURN NEW;
END
$$;
