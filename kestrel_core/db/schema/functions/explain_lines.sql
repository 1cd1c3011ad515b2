-- explain_lines(): the console's EXPLAIN, each line measured on the server (review r44b).
--
-- The console sizes a SELECT's rows on the server (a larger row comes as NULLs), but an
-- EXPLAIN cannot be wrapped in a SELECT: its lines print the planner's folded constants, and
-- one line of 32 MB reached the client whatever --max-bytes. This runs the EXPLAIN and returns
-- each line with its size in bytes, the line itself only when it is at most p_max_bytes.
-- SECURITY INVOKER: it runs, as its caller, what the caller could send itself; only the reader
-- role may call it (the console's ad-hoc SQL runs as it), and it runs EXPLAIN only.
CREATE OR REPLACE FUNCTION {schema}.explain_lines(p_statement text, p_max_bytes integer)
RETURNS TABLE (line text, bytes integer)
LANGUAGE plpgsql SECURITY INVOKER AS $$
DECLARE
    v text;
BEGIN
    IF p_statement !~* '^explain\M' THEN
        RAISE EXCEPTION 'explain_lines runs an EXPLAIN, not this statement' USING ERRCODE = '42501';
    END IF;
    FOR v IN EXECUTE p_statement LOOP
        bytes := octet_length(v);
        line := CASE WHEN bytes <= p_max_bytes THEN v END;
        RETURN NEXT;
    END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION {schema}.explain_lines(text, integer) FROM PUBLIC;
