-- Kestrel schema, version 37: a paused execution stays as its pause left it.
--
-- guard_paused_executions (0030) fires on a change of status into or out of 'paused' only: a
-- worker login could still change a paused execution's deadline, run time, owner, claim or
-- input with a plain UPDATE that leaves it paused. Now, for any login but the schema's owner,
-- an UPDATE of a paused row may change its lease only (the claim it was paused under renews it
-- while its step in flight runs, and clears it when it lets go: dispatch/lease.py)
-- (guard_paused_rows, in schema/functions/).
CREATE FUNCTION {schema}.guard_paused_rows() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN NEW;
END
$$;
CREATE TRIGGER guard_paused_rows
    BEFORE UPDATE ON {schema}.workflow_executions
    FOR EACH ROW
    WHEN (OLD.status = 'paused' AND NEW.status = 'paused')
    EXECUTE FUNCTION {schema}.guard_paused_rows();
REVOKE EXECUTE ON FUNCTION {schema}.guard_paused_rows() FROM PUBLIC;
