-- execution_requeued(): its current definition (created by migration 0008).
--
-- A requeued execution gets a fresh deadline from its next start.
CREATE OR REPLACE FUNCTION {schema}.execution_requeued() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.deadline_at := NULL;
    RETURN NEW;
END
$$;
