-- guard_waits(): its current definition (created by migration 0024).
--
-- A decided wait never changes, for anyone; another login may only reopen a wait and rewrite
-- the details of a wait that is not a gate, never resolve a wait nor change what an approver
-- is shown.
CREATE OR REPLACE FUNCTION {schema}.guard_waits() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF OLD.decision IS NOT NULL AND NEW IS DISTINCT FROM OLD THEN
        RAISE EXCEPTION 'permission denied to change % "%" of execution %: it was decided (% by % at %) and a decision is final',
            OLD.kind, OLD.step_id, OLD.execution_id, OLD.decision, coalesce(OLD.decided_by, 'the timeout'),
            to_char(OLD.decided_at, 'YYYY-MM-DD HH24:MI:SS TZ')
            USING ERRCODE = '42501';
    END IF;
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF OLD.resolved_at IS NULL AND NEW.resolved_at IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied to resolve % "%" of execution % with a plain UPDATE as role %',
            OLD.kind, OLD.step_id, OLD.execution_id, current_user
            USING ERRCODE = '42501',
                  HINT = 'A gate is decided by kestrel-console approve / reject (audited); sleeps, timeouts, events and children are resolved by the engine.';
    END IF;
    -- What an approver is shown stays what the workflow asked about (a sleep's, an event's,
    -- children's details are the engine's own bookkeeping, rewritten on a replay).
    IF NEW.details IS DISTINCT FROM OLD.details AND OLD.kind = 'approval' THEN
        RAISE EXCEPTION 'permission denied to change the details of % "%" of execution % as role %',
            OLD.kind, OLD.step_id, OLD.execution_id, current_user
            USING ERRCODE = '42501';
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_waits() FROM PUBLIC;
