-- name: catalog
-- One row per pg_catalog function name: whether every overload is safe by volatility and kind,
-- and whether one of them takes SQL as text (an argument named query/sql, or a refcursor).
SELECT p.proname,
       bool_and(p.provolatile IN ('i', 's') AND p.prokind IN ('f', 'a', 'w')) AS safe_kind,
       bool_or('refcursor'::regtype = ANY (p.proargtypes::oid[])
               OR coalesce(array_to_string(p.proargnames, ' ') ~* '\m(query|sql|cursor)\M', false))
           AS takes_sql
  FROM pg_proc p
 WHERE p.pronamespace = 'pg_catalog'::regnamespace
 GROUP BY p.proname
 ORDER BY p.proname;

-- name: version
SELECT current_setting('server_version');

-- name: operators
-- One row per pg_catalog operator name: its functions, every overload's.
SELECT o.oprname, array_agg(DISTINCT p.proname ORDER BY p.proname)
  FROM pg_operator o JOIN pg_proc p ON p.oid = o.oprcode
 WHERE o.oprnamespace = 'pg_catalog'::regnamespace
   AND p.pronamespace = 'pg_catalog'::regnamespace
 GROUP BY o.oprname
HAVING count(*) = (SELECT count(*) FROM pg_operator x
                    WHERE x.oprname = o.oprname AND x.oprnamespace = 'pg_catalog'::regnamespace)
 ORDER BY o.oprname;

-- name: types
SELECT typname FROM pg_type WHERE typnamespace = 'pg_catalog'::regnamespace ORDER BY typname;
