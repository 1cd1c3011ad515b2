-- guard_execution_identity(): its current definition (created by migration 0029).
--
-- An execution's id never changes, for anyone: its waits, checkpoints, attempts, children and
-- audit rows name it, and a renumbered waiting execution was detached from its gate. (A
-- migration that must renumber disables this trigger inside its own transaction.) Its
-- version, set by its first claim, changes only through the schema owner's code: a replay
-- runs the code version it started with.
CREATE OR REPLACE FUNCTION {schema}.guard_execution_identity() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id THEN
        RAISE EXCEPTION 'permission denied to change the id of execution % (to %): an execution keeps its id',
            OLD.id, NEW.id USING ERRCODE = '42501';
    END IF;
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to change the version of execution % (from % to %) as role %',
        OLD.id, OLD.version, coalesce(NEW.version, 'NULL'), current_user
        USING ERRCODE = '42501',
              HINT = 'An execution runs the version of the code its first claim chose; fork it to run another.';
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_execution_identity() FROM PUBLIC;
