-- name: drop_schema
DROP SCHEMA IF EXISTS {} CASCADE;

-- name: login_exists
SELECT 1 FROM pg_roles WHERE rolname = %s;

-- name: create_login
CREATE ROLE {login} LOGIN IN ROLE {role};

-- name: grant_role
GRANT {role} TO {login};
