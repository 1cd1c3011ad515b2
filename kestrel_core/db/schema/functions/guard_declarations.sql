-- guard_declarations(): its current definition (created by migration 0024).
--
-- What a non-owner may write in queues and schedules: a rate window of at most a day with no
-- future start in it, no operator ('cli') schedule, no infinite next tick, a next tick moved
-- only by the scheduler's advance or a redeclaration.
CREATE OR REPLACE FUNCTION {schema}.guard_declarations() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID), 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'queues' THEN
        -- A rate window longer than a day is a pause that shows as 'active'. Checked when it
        -- is declared, not at each claim: a queue declared so before version 24 still runs.
        IF NEW.rate_period > interval '1 day'
           AND (TG_OP = 'INSERT' OR NEW.rate_period IS DISTINCT FROM OLD.rate_period) THEN
            RAISE EXCEPTION 'cannot declare queue "%" with a rate window of % as role %: at most a day',
                NEW.name, NEW.rate_period, current_user
                USING ERRCODE = '23514',
                      HINT = 'Pause a queue with kestrel-console queue pause (audited).';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(NEW.rate_starts) AS s(at) WHERE s.at > clock_timestamp()) THEN
            RAISE EXCEPTION 'permission denied to record a claim in the future in the rate window of queue "%" as role %',
                NEW.name, current_user USING ERRCODE = '42501',
                HINT = 'Pause a queue with kestrel-console queue pause (audited).';
        END IF;
        RETURN NEW;
    END IF;
    -- schedules
    -- (an operator's schedule's ticks are advanced by the scheduler like any other's)
    IF (TG_OP = 'INSERT' AND NEW.source <> 'code')
       OR (TG_OP = 'UPDATE' AND (NEW.source IS DISTINCT FROM OLD.source
           OR (OLD.source <> 'code'
               AND (NEW.cron, NEW.timezone, NEW.workflow_name, NEW.input, NEW.catch_up)
                   IS DISTINCT FROM (OLD.cron, OLD.timezone, OLD.workflow_name, OLD.input, OLD.catch_up)))) THEN
        RAISE EXCEPTION 'permission denied to write operator schedule "%" with plain SQL as role %', NEW.name, current_user
            USING ERRCODE = '42501',
                  HINT = 'Operator schedules are added, paused and removed by kestrel-console schedule add / pause / remove (audited).';
    END IF;
    -- The next tick moves by the scheduler's advance of a due schedule (forward), or with a
    -- redeclared cron or timezone (audited); an advance past a day ahead is audited too
    -- (audit_declarations): a far tick is a pause that shows as active (since 0029).
    IF TG_OP = 'UPDATE' AND NEW.next_tick IS DISTINCT FROM OLD.next_tick
       AND (NEW.cron, NEW.timezone) IS NOT DISTINCT FROM (OLD.cron, OLD.timezone)
       AND (OLD.next_tick > clock_timestamp() OR NEW.next_tick <= OLD.next_tick) THEN
        RAISE EXCEPTION 'permission denied to move the next tick of schedule "%" from % to % as role %: only the scheduler advances a due schedule',
            NEW.name, OLD.next_tick, NEW.next_tick, current_user
            USING ERRCODE = '42501', HINT = 'Pause a schedule with kestrel-console schedule pause (audited).';
    END IF;
    IF NOT isfinite(NEW.next_tick) THEN
        RAISE EXCEPTION 'permission denied to set the next tick of schedule "%" to % as role % (that is a pause)',
            NEW.name, NEW.next_tick, current_user
            USING ERRCODE = '42501', HINT = 'Pause a schedule with kestrel-console schedule pause (audited).';
    END IF;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.guard_declarations() FROM PUBLIC;
