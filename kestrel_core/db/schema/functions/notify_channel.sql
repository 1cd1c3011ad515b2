-- notify_channel(): its current definition (created by migration 0009).
--
-- The LISTEN/NOTIFY channel, 'kestrel:<schema>', named once in SQL; Python names the same
-- channel with kestrel_core.statements.notify_channel (tests/core/test_statements.py checks
-- they agree). It sets its own search_path, so current_schema() is this schema whoever calls
-- it. Only the SECURITY DEFINER functions call it: no role needs EXECUTE on it.
CREATE OR REPLACE FUNCTION {schema}.notify_channel() RETURNS text
LANGUAGE sql STABLE SET search_path = {schema}, pg_temp AS $$
    SELECT 'kestrel:' || current_schema()
$$;
REVOKE EXECUTE ON FUNCTION {schema}.notify_channel() FROM PUBLIC;
