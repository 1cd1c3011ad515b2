-- name: assume
-- Checks whether the login may assume the role and, if so, does (SET LOCAL ROLE) in the same
-- statement: one round trip.
SELECT login, superuser, role_exists, member, schema_usage,
       CASE WHEN role_exists AND member AND schema_usage THEN set_config('role', %(role)s, true) END
  FROM (SELECT session_user::text AS login,
               coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = session_user), false) AS superuser,
               r.oid IS NOT NULL AS role_exists,
               coalesce(pg_has_role(session_user, r.oid, 'MEMBER'), false) AS member,
               coalesce(has_schema_privilege(r.oid, n.oid, 'USAGE'), false) AS schema_usage
          FROM (SELECT 1) AS one
          LEFT JOIN pg_roles r ON r.rolname = %(role)s
          LEFT JOIN pg_namespace n ON n.nspname = %(schema)s) AS checked;

-- name: privilege
-- The login itself first, then any role it may become, that holds an attribute or a
-- predefined role's power no SET ROLE takes away; then one that owns the Kestrel schema, one of
-- its tables or the database (an owner ALTERs, DROPs and disables the triggers of what it owns:
-- it is refused like a superuser unless opted in).
SELECT login, rolname, what FROM (
    SELECT session_user::text AS login, r.rolname::text AS rolname,
           CASE WHEN r.rolsuper THEN 'a superuser' WHEN r.rolbypassrls THEN 'has BYPASSRLS'
                WHEN r.rolcreaterole THEN 'has CREATEROLE' WHEN r.rolreplication THEN 'has REPLICATION'
                ELSE 'holds the powers of ' || r.rolname END AS what,
           0 AS rank, r.rolname <> session_user AS other, NOT r.rolsuper AS plain,
           r.rolname = ANY (%(powers)s) AS predefined
      FROM pg_roles r
     WHERE (r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolreplication OR r.rolname = ANY (%(powers)s))
       AND pg_has_role(session_user, r.oid, 'MEMBER')
    UNION ALL
    SELECT session_user::text, r.rolname::text, 'owns ' || o.what, 1, r.rolname <> session_user, true, false
      FROM (SELECT n.nspowner AS owner, format('schema %%I', n.nspname) AS what
              FROM pg_namespace n WHERE n.nspname = %(schema)s
            UNION ALL
            SELECT c.relowner, format('table %%I.%%I', n.nspname, c.relname)
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s
            UNION ALL
            SELECT d.datdba, format('database %%I', d.datname) FROM pg_database d
             WHERE d.datname = current_database()) AS o
      JOIN pg_roles r ON r.oid = o.owner
     WHERE pg_has_role(session_user, r.oid, 'MEMBER')
) AS found
 ORDER BY rank, other, plain, predefined, rolname, what
 LIMIT 1;

-- name: release
-- psycopg names its own prepared statements _pg3_*: those stay, the query's go.
SELECT pg_advisory_unlock_all(),
       ARRAY(SELECT name FROM pg_prepared_statements WHERE name NOT LIKE '\_pg3\_%');

-- name: deallocate
DEALLOCATE {name};
