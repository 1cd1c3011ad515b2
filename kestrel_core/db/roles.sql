-- db/roles.py: Least-privilege roles: for workers, for operators, for the console's ad-hoc SQL.

-- name: lock
-- Same lock as migrate.py: grants and schema changes never interleave.
SELECT pg_advisory_xact_lock(hashtext('kestrel.migrate'));

-- name: role_exists
SELECT rolcanlogin FROM pg_roles WHERE rolname = %s;

-- name: create_role
CREATE ROLE {role} NOLOGIN;

-- name: schema_exists
SELECT 1 FROM pg_namespace WHERE nspname = %s;

-- name: can_create_roles
SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user;

-- name: is_superuser
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;

-- name: grant_set_parameter
GRANT SET ON PARAMETER {parameter} TO {role};

-- name: schema_tables
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY c.relname;

-- name: schema_sequences
-- The sequences of Kestrel's tables (identity columns), by the table that owns each.
SELECT s.relname FROM pg_class s
  JOIN pg_namespace n ON n.oid = s.relnamespace
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid
                  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
  JOIN pg_class t ON t.oid = d.refobjid
 WHERE n.nspname = %s AND s.relkind = 'S' AND t.relname = ANY(%s)
 ORDER BY s.relname;

-- name: schema_functions
-- Kestrel's functions: one file each under schema/functions/.
SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = %s AND p.proname = ANY(%s) ORDER BY 1;

-- name: is_member
SELECT pg_has_role(%s, %s, 'MEMBER');

-- name: grant_role
GRANT {role} TO {member};

-- name: has_parameter_privilege
SELECT has_parameter_privilege(%s, %s, 'SET');

-- name: function_exists
SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = %s AND p.proname = %s;

-- name: revoke_schema
-- The grants of ensure_roles (_grant), one object at a time: never ALL ... IN SCHEMA, which
-- reaches another application's objects sharing the schema. Every marker is an identifier
-- composed by roles.py ({roles}: the three roles), or a privilege list or function signature
-- from its own tables and the catalog.
REVOKE ALL ON SCHEMA {schema} FROM {roles};

-- name: grant_schema
GRANT USAGE ON SCHEMA {schema} TO {roles};

-- name: revoke_table
REVOKE ALL ON TABLE {table} FROM {roles};

-- name: grant_table_read
GRANT SELECT ON TABLE {table} TO {operator}, {reader};

-- name: revoke_sequence
REVOKE ALL ON SEQUENCE {sequence} FROM {roles};

-- name: grant_sequence
GRANT USAGE ON SEQUENCE {sequence} TO {worker};

-- name: revoke_function
-- {function}: the function's regprocedure text, the catalog's own quoting of its name and types.
REVOKE ALL ON FUNCTION {function} FROM PUBLIC, {roles};

-- name: grant_worker_writes
-- {privileges}: one table's entry of WORKER_WRITES (roles.py), e.g. SELECT, UPDATE (id).
GRANT {privileges} ON TABLE {schema}.{table} TO {worker};

-- name: grant_function
-- {arguments}: the argument types of WORKER_FUNCTIONS, OPERATOR_FUNCTIONS, READER_FUNCTIONS.
GRANT EXECUTE ON FUNCTION {schema}.{function}({arguments}) TO {role};
