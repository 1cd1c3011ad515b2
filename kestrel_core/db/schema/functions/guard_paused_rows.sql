-- guard_paused_rows(): its current definition (created by migration 0037, which attaches the
-- trigger of the same name to workflow_executions).
--
-- Runs for an UPDATE that leaves an execution paused: from any login but the schema's owner
-- (the audited operator functions run as it), only its lease may change (renewed by the claim
-- it was paused under while its step in flight runs, cleared when that claim lets go).
CREATE OR REPLACE FUNCTION {schema}.guard_paused_rows() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF (to_jsonb(NEW) - 'lease_expires' - 'updated_at') = (to_jsonb(OLD) - 'lease_expires' - 'updated_at') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'permission denied to change paused execution % with a plain UPDATE as role %', OLD.id, current_user
        USING ERRCODE = '42501',
              HINT = 'A paused execution changes only through the audited operator functions (resume, cancel, fork).';
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_paused_rows() FROM PUBLIC;
